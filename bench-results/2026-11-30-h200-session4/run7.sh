#!/bin/bash
# Window rows read as aligned pairs of values (pairs) against main: spills, GPU tests, A/B.
set -o pipefail
ptxas -arch=sm_90 -v .gpu/pairs/cluda.ptx -o /dev/null 2>&1 | grep -A1 "run1_f64" | grep -E "Compiling|spill" | paste - - | sed -E "s/ptxas info *: //g; s/Compiling entry function//" | cut -c1-150
echo "== gpu_finder pairs $(date -u +%T)"; timeout 150 .gpu/pairs/gpu_finder --include-ignored --test-threads 2 2>&1 | grep -E "test result|panicked|differs|FAILED" | cut -c1-300 | head -20
run() { echo "== ladder $1 $2 $(date -u +%T)"; timeout 120 .gpu/$1/ladder --bench --sizes $2 --frames 10000 --cpu-frames 200 --passes 2 --steps opt10 --out $OUT/b 2>&1 | grep -E "^---|warm" | paste - - | sed -E 's/ +cold.*warm/ warm/; s/\(.*//'
grep -h "Floors" $OUT/b/*/ladder-*.md | sed -E 's/.*(kernel [0-9.]+ us\/frame).*/\1/'; rm -rf $OUT/b; }
run main 9; run pairs 9; run main 9; run pairs 9; run pairs 3
echo "== end $(date -u +%T)"
