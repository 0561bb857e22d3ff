# Pipeline depth and tile width on the memory-bound 1x1 zoo lines (s24): each line's default,
# the cuBLAS-like 128x96 two-warpgroup TMA tile at 7 stages, and deep against 4-stage forms of
# the TMA tiles, in one process against cuDNN.
set -x
O=/tmp/o3; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
D=bench/results/2026-12-04_s24
timeout 400 python bench/time_configs.py --suite $D/pw_slow.txt --only _ --configs "128,96,64,2,1,64,96,0,0,0,1,-1,7,3;128,96,64,2,1,64,96,0,0,0,1,-1,4,3;128,128,64,2,1,64,128,0,0,0,1,-1,6,3;128,128,64,2,1,64,128,0,0,0,1,-1,4,3;128,64,64,2,1,64,64,0,0,0,1,-1,8,3;128,64,64,2,1,64,64,0,0,0,1,-1,4,3;64,128,64,1,1,64,128,0,0,0,1,-1,8,20;64,96,64,1,1,64,96,0,0,0,1,-1,8,20;128,192,64,2,1,64,192,0,0,0,1,-1,5,3;128,256,64,2,1,64,256,0,0,0,1,-1,4,3" --out $O/pw.md --json $O/pw.json > $O/pw.txt 2>&1
pack
