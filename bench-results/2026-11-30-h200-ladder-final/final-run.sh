#!/bin/bash
# H200 run of the final main of session 4: GPU tests (finder, ptx, matcher), the full ladder, the 1M-frame long run,
# memcheck and racecheck,
# the demo on the GPU.
set -o pipefail
B=.gpu/bin
L=$OUT/all.log
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
{
echo "== gpu $(date -u +%T)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
echo "== ptx"; $B/ptx 2>&1 | grep -E "test result|FAILED"
echo "== gpu_finder $(date -u +%T)"; timeout 80 $B/gpu_finder --include-ignored --test-threads 2 2>&1 | grep -E "^test |test result|panicked|FAILED|registers|per barrier"
echo "== matcher_gpu $(date -u +%T)"; timeout 60 $B/matcher_gpu --include-ignored --test-threads 2 2>&1 | grep -E "test result|panicked|FAILED"
echo "== ladder $(date -u +%T)"; timeout 330 $B/ladder --bench --sizes 3,9 --frames 20000 --cpu-frames 1000 --passes 5 --out $OUT/bench 2>&1 | grep -v "^    generated"
echo "== long run $(date -u +%T)"; timeout 40 $B/long_runs --ignored gpu_zero_copy --nocapture 2>&1 | grep -E "frames=|test result|panicked"
echo "== memcheck $(date -u +%T)"; timeout 40 $CS --tool memcheck $B/gpu_finder --include-ignored --exact tiny_cap_grows_and_stays_exact 2>&1 | grep -E "ERROR SUMMARY|test result"
echo "== racecheck $(date -u +%T)"; timeout 40 $CS --tool racecheck $B/gpu_finder --include-ignored --exact tiny_cap_grows_and_stays_exact 2>&1 | grep -E "RACECHECK SUMMARY|test result"
echo "== demo $(date -u +%T)"; timeout 30 $B/cluda demo --device gpu 2>&1 | tail -3
echo "== end $(date -u +%T)"
} 2>&1 | tee $L
# Experiments after the final main (not merged builds, staged under .gpu/x/<name>/): the 9x9 run
# kernels with the pixel state in shared memory between uses, 1-D (r1s) and branch tiles2d's
# 2-D tiles (t2ds).
X=.gpu/x
{
for v in t2ds r1s; do echo "== ptxas $v"; ptxas -arch=sm_90 -v $X/$v/cluda.ptx -o /dev/null 2>&1 | grep -A1 "run1_f64_9\|run2d_f64_9\|run1_f64_3" | grep -E "Compiling|spill" | paste - - | sed -E "s/ptxas info *: //g; s/Compiling entry function//" | cut -c1-150; done
run() { echo "== ladder $1 $2 $(date -u +%T)"; timeout 60 $3 --bench --sizes $2 --frames 10000 --cpu-frames 200 --passes 2 --steps opt10 --out $OUT/xb > $OUT/xb.log 2>&1
grep -E "^---|warm" $OUT/xb.log | paste - - | sed -E 's/ +cold.*warm/ warm/; s/\(.*//'; grep -ho '"check": "[0-9a-f]*"' $OUT/xb/*/env.json | tr '\n' ' '; echo
grep -h "Floors" $OUT/xb/*/ladder-*.md | sed -E 's/.*(kernel [0-9.]+ us\/frame).*/\1/'; rm -rf $OUT/xb $OUT/xb.log; }
run main 9 $B/ladder; run t2ds 9 $X/t2ds/ladder; run r1s 9 $X/r1s/ladder
echo "== end $(date -u +%T)"
} 2>&1 | tee $OUT/experiments.log
