#!/bin/bash
# A/B: main's run1 kernels against predicate window flags (pred), and pred with LAG 3 and 4.
set -o pipefail
for v in pred lag4; do echo "== ptxas $v"; ptxas -arch=sm_90 -v .gpu/$v/cluda.ptx -o /dev/null 2>&1 | grep -A1 "run1_f64" | grep -E "Compiling|spill|registers" | paste - - | sed -E "s/ptxas info *: //g" | cut -c1-200; done
for v in lag4 pred; do echo "== gpu_finder $v $(date -u +%T)"; timeout 150 .gpu/$v/gpu_finder --include-ignored --test-threads 2 2>&1 | grep -E "test result|panicked|differs|FAILED" | cut -c1-300 | head -20; done
for v in main pred lag4 lag3 main lag4; do
echo "== ladder $v $(date -u +%T)"; timeout 120 .gpu/$v/ladder --bench --sizes 3,9 --frames 10000 --cpu-frames 200 --passes 2 --steps opt10 --out $OUT/b-$v 2>&1 | grep -E "^---|cold"
grep -h "Floors" $OUT/b-$v/*/ladder-*.md | sed -E 's/.*(kernel [0-9.]+ us\/frame).*/\1/'
done
rm -rf $OUT/b-*
echo "== end $(date -u +%T)"
