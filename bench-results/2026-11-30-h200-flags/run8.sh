#!/bin/bash
# max.f64 for window maxima (Real::max_cmp).
set -o pipefail
L=$OUT/all.log
{
echo "== ptxas $(date -u +%T)"; ptxas -arch=sm_90 -v .gpu/main.ptx -o /dev/null 2>&1 | grep -A1 "run1_" | grep -E "Compiling|spill" | paste - - | sed -E "s/ptxas info *: Compiling entry function//; s/for 'sm_90'//"
echo "== ladder $(date -u +%T)"; timeout 200 .gpu/bin/ladder --bench --sizes 3,9 --frames 10000 --cpu-frames 200 --passes 2 --steps opt10 --out $OUT/bench 2>&1 | grep -E "^---|cold|floors"
grep -h "Floors" $OUT/bench/*/ladder-*.md
echo "== gpu_finder $(date -u +%T)"; timeout 200 .gpu/bin/gpu_finder --include-ignored --test-threads 2 --skip run_kernel_occupancy 2>&1 | grep -E "test result|panicked|FAILED|differs" | cut -c1-300 | head -30
echo "== end $(date -u +%T)"
} 2>&1 | tee $L
