#!/bin/bash
# ncu of the 9x9 run kernels (main's run1, branch tiles2d's run2d) and main's 3x3: sections
# plus per-SASS-instruction stall samples (source page), to find where a frame's time goes.
set -o pipefail
ncu --version | tail -1
prof() { # name binary kernel size
  timeout 150 ncu --kernel-name $3 --launch-skip 3 --launch-count 1 --clock-control none \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --section SourceCounters --section LaunchStats --section Occupancy \
    -o $OUT/rep-$1 $2 --bench --sizes $4 --frames 300 --passes 2 --steps opt10 --child opt10 \
    --child-size $4 --child-precision f64 > $OUT/ncu-$1.log 2>&1
  echo "== $1 rc=$?"; ncu -i $OUT/rep-$1.ncu-rep --print-details all > $OUT/det-$1.txt 2>&1
  grep -E "Duration|Throughput|Stall|Warp Cycles|Eligible|Registers|Shared Memory|Wavefronts|Bank" $OUT/det-$1.txt | head -40
  ncu -i $OUT/rep-$1.ncu-rep --page source --csv --print-source sass > $OUT/sass-$1.csv 2>$OUT/sass-$1.err; echo "sass rc=$? $(wc -l < $OUT/sass-$1.csv)"
}
prof main9 .gpu/main/ladder cluda_run1_f64_9 9
prof t2d9 .gpu/bin/ladder cluda_run2d_f64_9 9
prof main3 .gpu/main/ladder cluda_run1_f64_3 3
