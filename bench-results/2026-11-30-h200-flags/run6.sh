#!/bin/bash
# Pipeline settings for opt10 3x3 f64 with the reordered run kernel (CLUDA_LADDER_TUNE).
set -o pipefail
L=$OUT/all.log
{
for t in "" "streams=1" "streams=2" "chunk=256,upload-frames=64" "chunk=256" "chunk=384,upload-frames=32" "streams=1,upload-frames=16" ""; do
echo "== [$t] $(date -u +%T)"; CLUDA_LADDER_TUNE="$t" timeout 100 .gpu/bin/ladder --bench --sizes 3 --frames 10000 --cpu-frames 200 --passes 2 --steps opt10 --out $OUT/b 2>&1 | grep -E "cold|tuned|rror" | head -3
done
echo "== end $(date -u +%T)"
} 2>&1 | tee $L
