#!/bin/bash
# First GPU run of branch tiles2d (run2d kernels, never run on a GPU when written).
# Stage: in /work/main, `git checkout tiles2d && tools/gpu-pack`, then copy main's ladder
# (built at main) to .gpu/main/ladder if an A/B is wanted, and the PTX to .gpu/run.ptx
# (`cp target/release/build/cluda-*/out/cluda.ptx .gpu/run.ptx`, the newest one).
# One device call: ptxas spills, the GPU tests (they exercise run2d for every 5x5-9x9 opt10
# case), then 9x9 opt10 excerpts (branch, and main's binary when staged).
set -o pipefail
L=$OUT/all.log
{
echo "== ptxas $(date -u +%T)"; ptxas -arch=sm_90 -v .gpu/run.ptx -o /dev/null 2>&1 | grep -A1 "run2d_\|run1_f64_9" | grep -E "Compiling|spill" | paste - - | sed -E "s/ptxas info *: Compiling entry function//; s/for 'sm_90'//"
echo "== gpu_finder $(date -u +%T)"; timeout 150 .gpu/bin/gpu_finder --include-ignored --test-threads 2 2>&1 | grep -E "^test |test result|panicked|differs|registers" | cut -c1-300 | head -60
for v in bin main; do [ -x .gpu/$v/ladder ] || continue
echo "== ladder $v $(date -u +%T)"; timeout 120 .gpu/$v/ladder --bench --sizes 9 --frames 10000 --cpu-frames 200 --passes 2 --steps opt10 --out $OUT/b-$v 2>&1 | grep -E "^---|cold"
grep -h "Floors" $OUT/b-$v/*/ladder-*.md
done
echo "== end $(date -u +%T)"
} 2>&1 | tee $L
