#!/bin/bash
set -o pipefail
B=.gpu/bin
L=$OUT/all.log
{
echo "== diag $(date -u +%T)"; timeout 60 $B/gpu_finder --include-ignored --exact run_kernel_occupancy_and_barrier_cost --nocapture 2>&1 | grep -E "run1|test result"
echo "== ladder $(date -u +%T)"; timeout 200 $B/ladder --bench --sizes 3,9 --frames 10000 --cpu-frames 1000 --passes 2 --steps opt10 --out $OUT/bench 2>&1 | grep -E "^---|cold|floors"
grep -h "Floors" $OUT/bench/*/ladder-*.md
echo "== gpu_finder $(date -u +%T)"; timeout 200 $B/gpu_finder --include-ignored --test-threads 2 --skip run_kernel_occupancy 2>&1 | grep -E "test result|panicked|FAILED|differs" | cut -c1-300 | head -30
echo "== end $(date -u +%T)"
} 2>&1 | tee $L
