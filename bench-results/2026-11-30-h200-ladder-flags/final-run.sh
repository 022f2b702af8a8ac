#!/bin/bash
# H200 run of main after the neighbour-flag run kernels: GPU tests, the full ladder, the 1M-frame long run, sanitizers,
# the demo on the GPU.
set -o pipefail
B=.gpu/bin
L=$OUT/all.log
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
{
echo "== gpu $(date -u +%T)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
echo "== ptx"; $B/ptx 2>&1 | grep -E "test result|FAILED"
echo "== gpu_finder $(date -u +%T)"; timeout 80 $B/gpu_finder --include-ignored --test-threads 2 2>&1 | grep -E "^test |test result|panicked|FAILED|registers|per barrier"
echo "== ladder $(date -u +%T)"; timeout 330 $B/ladder --bench --sizes 3,9 --frames 20000 --cpu-frames 1000 --passes 5 --out $OUT/bench 2>&1 | grep -v "^    generated"
echo "== long run $(date -u +%T)"; timeout 40 $B/long_runs --ignored gpu_zero_copy --nocapture 2>&1 | grep -E "frames=|test result|panicked"
echo "== memcheck $(date -u +%T)"; timeout 40 $CS --tool memcheck $B/gpu_finder --include-ignored --exact tiny_cap_grows_and_stays_exact 2>&1 | grep -E "ERROR SUMMARY|test result"
echo "== racecheck $(date -u +%T)"; timeout 40 $CS --tool racecheck $B/gpu_finder --include-ignored --exact tiny_cap_grows_and_stays_exact 2>&1 | grep -E "RACECHECK SUMMARY|test result"
echo "== demo $(date -u +%T)"; timeout 30 $B/cluda demo --device gpu 2>&1 | tail -3
echo "== end $(date -u +%T)"
} 2>&1 | tee $L
