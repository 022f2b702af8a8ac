#!/bin/bash
# Diagnostic builds of the 9x9 run kernel (wrong results on purpose, timing only): norec (no
# records written), win3 (classified from a 3x3 window, 9x9 records), w3nr (both), nowait (no
# flag or arrival waits: the blocks' work alone, racing).
set -o pipefail
run() { echo "== ladder $1 $2 $(date -u +%T)"; timeout 120 .gpu/$1/ladder --bench --sizes $2 --frames 10000 --cpu-frames 200 --passes 2 --steps opt10 --out $OUT/b 2>&1 | grep -E "^---|warm" | paste - - | sed -E 's/ +cold.*warm/ warm/; s/\(.*//'
grep -h "Floors" $OUT/b/*/ladder-*.md | sed -E 's/.*(kernel [0-9.]+ us\/frame).*/\1/'; rm -rf $OUT/b; }
for v in main norec win3 w3nr nowait main; do run $v 9; done
echo "== end $(date -u +%T)"
