#!/bin/bash
# A/B: window-line prefetch into L1 (pf), plus records loads issued together (pfrec), against main.
set -o pipefail
ptxas -arch=sm_90 -v .gpu/pfrec/cluda.ptx -o /tmp/pf.cubin 2>&1 | grep -A1 "run1_f64_9\|run1_f64_3" | grep -E "Compiling|spill" | paste - - | cut -c1-200
cuobjdump -sass /tmp/pf.cubin 2>/dev/null | awk '/Function : cluda_run1_f64_9/{f=1} f&&/CCTL|PREF/{print; n++} n>3{exit}'
echo "== gpu_finder pfrec $(date -u +%T)"; timeout 150 .gpu/pfrec/gpu_finder --include-ignored --test-threads 2 2>&1 | grep -E "test result|panicked|differs|FAILED" | cut -c1-300 | head -20
run() { echo "== ladder $1 $2 $(date -u +%T)"; timeout 120 .gpu/$1/ladder --bench --sizes $2 --frames 10000 --cpu-frames 200 --passes 2 --steps opt10 --out $OUT/b 2>&1 | grep -E "^---|warm" | paste - - | sed -E 's/ +cold.*warm/ warm/; s/\(.*//'
grep -h "Floors" $OUT/b/*/ladder-*.md | sed -E 's/.*(kernel [0-9.]+ us\/frame).*/\1/'; rm -rf $OUT/b; }
run main 9; run pf 9; run pfrec 9; run main 9; run pfrec 9; run pf 9; run main 3; run pfrec 3
echo "== end $(date -u +%T)"
