#!/bin/bash
# Matcher GPU run: tests then bench; everything logged under $OUT.
set -o pipefail
cd "$(dirname "$0")/.."
D=.gpu-matcher
mkdir -p /tmp/cl
ls /usr/local/cuda/lib64/ 2>/dev/null | grep -i cublas | tee $OUT/cublas-libs.txt
lib=$(ls /usr/local/cuda/lib64/libcublas.so.1[0-9]* /usr/local/cuda*/targets/x86_64-linux/lib/libcublas.so.1[0-9]* /usr/lib/x86_64-linux-gnu/libcublas.so.1[0-9]* 2>/dev/null | grep -v Lt | head -1)
echo "cublas: $lib"
[ -n "$lib" ] && ln -sf "$lib" /tmp/cl/libcublas.so
export LD_LIBRARY_PATH=/tmp/cl:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv | tee $OUT/gpu.txt
/usr/local/cuda/bin/ptxas -arch=sm_90 -v $D/cluda_gpu.ptx -o /tmp/x.cubin > $OUT/ptxas.txt 2>&1; grep -A2 "cluda_match" $OUT/ptxas.txt | grep -v "^--" | head -40
timeout ${TEST_T:-150} $D/matcher_gpu --include-ignored 2>&1 | tee $OUT/test.log
MATCHER_BENCH_OUT=$OUT timeout ${BENCH_T:-240} $D/matcher-bench --bench 2>&1 | tee $OUT/bench.log
