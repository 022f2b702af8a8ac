#!/bin/bash
# GPU tests and 9x9 excerpts of the shared-state branches against main (.gpu/bin).
set -o pipefail
X=.gpu/x
{
for v in shared-state shared-pairs; do [ -d $X/$v ] || continue
echo "== ptxas $v"; ptxas -arch=sm_90 -v $X/$v/cluda.ptx -o /dev/null 2>&1 | grep -A1 "run1_f64" | grep -E "Compiling|spill" | paste - - | sed -E "s/ptxas info *: //g; s/Compiling entry function//" | cut -c1-150
echo "== gpu_finder $v $(date -u +%T)"; timeout 120 $X/$v/gpu_finder --include-ignored --test-threads 2 2>&1 | grep -E "test result|panicked|FAILED" | head -8
done
run() { echo "== ladder $1 $(date -u +%T)"; timeout 60 $2 --bench --sizes 3,9 --frames 10000 --cpu-frames 200 --passes 2 --steps opt10 --out $OUT/xb > $OUT/xb.log 2>&1
grep -E "^---|warm" $OUT/xb.log | paste - - | sed -E 's/ +cold.*warm/ warm/; s/\(.*//'; grep -ho '"check": "[0-9a-f]*"' $OUT/xb/*/env.json | tr '\n' ' '; echo
grep -h "Floors" $OUT/xb/*/ladder-*.md | sed -E 's/.*(kernel [0-9.]+ us\/frame).*/\1/'; rm -rf $OUT/xb $OUT/xb.log; }
run main .gpu/bin/ladder
for v in shared-state shared-pairs; do [ -x $X/$v/ladder ] && run $v $X/$v/ladder; done
run main .gpu/bin/ladder
echo "== end $(date -u +%T)"
} 2>&1 | tee $OUT/all.log
