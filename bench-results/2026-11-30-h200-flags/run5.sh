#!/bin/bash
# A/B, alternating: efa1dd5's run kernel (.gpu/old) against the reordered one (.gpu/bin:
# publish before the reduction math, thresholds after, records via write_record).
set -o pipefail
L=$OUT/all.log
{
for i in 1 2 3; do for v in old bin; do
echo "== $v $i $(date -u +%T)"; timeout 100 .gpu/$v/ladder --bench --sizes 3 --frames 10000 --cpu-frames 200 --passes 2 --steps opt10 --out $OUT/b-$v-$i 2>&1 | grep -E "cold" | head -2
grep -h "Floors" $OUT/b-$v-$i/*/ladder-*.md | grep -o "both directions.*"
done; done
echo "== end $(date -u +%T)"
} 2>&1 | tee $L
