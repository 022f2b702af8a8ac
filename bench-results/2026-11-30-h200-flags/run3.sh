#!/bin/bash
# A/B of the 9x9 run kernel: row sums + margin (sep, .gpu/bin) against direct window sums
# (.gpu/alt, built with the separable path off), ladder excerpts and ncu warp states.
set -o pipefail
L=$OUT/all.log
{
echo "== ptxas $(date -u +%T)"; which ptxas && for f in sep direct; do ptxas -arch=sm_90 -v .gpu/$f.ptx -o /dev/null 2>&1 | grep -A1 "run1_f64_9\|run1_f64_3" | grep -E "Compiling|registers|spill" | sed "s/^/$f: /"; done
for v in bin alt; do
echo "== ladder $v $(date -u +%T)"; timeout 200 .gpu/$v/ladder --bench --sizes 9 --frames 10000 --cpu-frames 1000 --passes 2 --steps opt10 --out $OUT/bench-$v 2>&1 | grep -E "^---|cold|floors"
grep -h "Floors" $OUT/bench-$v/*/ladder-*.md
echo "== ncu $v $(date -u +%T)"; timeout 120 ncu --kernel-name cluda_run1_f64_9 --launch-skip 3 --launch-count 1 --clock-control none --section WarpStateStats --section SpeedOfLight --section SchedulerStats .gpu/$v/ladder --bench --sizes 9 --frames 300 --passes 2 --steps opt10 --child opt10 --child-size 9 --child-precision f64 > $OUT/ncu-$v.txt 2>&1; grep -E "Duration|Stall|Warp Cycles|Issued Warp|Active Warps|No Eligible|Throughput" $OUT/ncu-$v.txt | head -40
done
echo "== end $(date -u +%T)"
} 2>&1 | tee $L
