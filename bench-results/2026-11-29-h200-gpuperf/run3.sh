#!/bin/bash
# gpuperf call 3: tests + ladder + ncu of C (lagged records, no look-back in the step kernel).
D=.gpu-gpuperf
T0=$(date +%s)
t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
mkdir -p $OUT/r
t tests
timeout 110 $D/c/gpu_finder --include-ignored --test-threads 1 > $OUT/r/test_c.log 2>&1; echo "rc=$?" >> $OUT/r/test_c.log
grep -E "test result|FAILED|panicked|rc=" $OUT/r/test_c.log | head -30
t bench c
timeout 70 $D/c/ladder --bench --sizes 3,9 --frames 4000 --passes 2 --allow-busy --steps opt1,opt8,opt9 --out $OUT/r/c > $OUT/r/c.out 2> $OUT/r/c.log; grep -E "^---|warm" $OUT/r/c.log | head -40
grep -h '"check"' -o $OUT/r/c/*/*.csv 2>/dev/null | head -2
M="gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum"
for z in "3 f32" "9 f64" "3 f64"; do set -- $z
  t ncu $1 $2
  timeout 40 ncu --metrics $M -k regex:"cluda_step" -s 60 -c 3 $D/c/ladder --bench --child opt9 --child-size $1 --child-precision $2 --frames 200 --passes 1 > $OUT/r/ncu_c$1$2.txt 2>&1
  grep -E "duration|registers|warps_active" $OUT/r/ncu_c$1$2.txt | head -9
done
t end
tar -C $OUT -czf $OUT/r.tgz r && rm -rf $OUT/r
