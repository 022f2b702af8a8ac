#!/bin/bash
# gpuperf call 2: isolated kernel times (ncu) of base and B.
D=.gpu-gpuperf
M="gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_registers,dram__bytes.sum,lts__t_bytes.sum,smsp__cycles_active.avg"
run() { # name exe size precision
  timeout 60 ncu --metrics $M -k regex:"cluda_(step|classify|prepare)" -s 60 -c 6 $2 --bench --child opt9 --child-size $3 --child-precision $4 --frames 200 --passes 1 > $OUT/ncu_$1.txt 2>&1
  grep -E "cluda_|duration|registers|warps_active|bytes|cycles|ERR" $OUT/ncu_$1.txt | head -60
}
run b3 $D/b/ladder 3 f32
run base3 $D/base/ladder 3 f32
run b9 $D/b/ladder 9 f64
