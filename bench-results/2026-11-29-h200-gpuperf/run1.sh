#!/bin/bash
# gpuperf call 1: tests of B, ladder base/A/B, nsys traces (3x3 opt9 f32).
D=.gpu-gpuperf
T0=$(date +%s)
t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
which nsys ncu
t tests
timeout 110 $D/b/gpu_finder --include-ignored --test-threads 1 > $OUT/test_b.log 2>&1; echo "rc=$?" >> $OUT/test_b.log
grep -E "test result|FAILED|panicked|us/frame" $OUT/test_b.log | head -30
L="--bench --sizes 3,9 --frames 4000 --passes 2 --allow-busy"
t bench b
timeout 60 $D/b/ladder $L --steps opt1,opt8,opt9 --out $OUT/b > $OUT/b.out 2> $OUT/b.log; grep -E "^---|warm|kernel" $OUT/b.log | head -40
t bench base
timeout 60 $D/base/ladder $L --steps opt1,opt8,opt9 --out $OUT/base > $OUT/base.out 2> $OUT/base.log; grep -E "^---|warm" $OUT/base.log | head -40
t bench a
timeout 35 $D/a/ladder $L --steps opt9 --out $OUT/a > $OUT/a.out 2> $OUT/a.log; grep -E "^---|warm" $OUT/a.log | head -20
if which nsys >/dev/null; then
  for v in base b; do
    t nsys $v
    timeout 40 nsys profile -t cuda -o /tmp/p_$v --force-overwrite=true $D/$v/ladder --bench --child opt9 --child-size 3 --child-precision f32 --frames 2000 --passes 1 > /dev/null 2>&1
    timeout 25 nsys stats -q -r cuda_gpu_kern_sum,cuda_gpu_trace -f csv -o $OUT/nsys_$v /tmp/p_$v.nsys-rep > /dev/null 2>&1
    ls $OUT | grep nsys_$v
  done
fi
t end
