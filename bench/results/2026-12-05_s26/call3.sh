# The 160- and 224-column warpgroup tiles (s24) timed against each line's default on the lines
# whose channels they fit (s24's wide_lines.txt), then s24's call3: pipeline depth and tile
# width on the 21 stride-1 1x1 zoo lines below cuDNN (pw_slow.txt).
set -x
O=/tmp/o3; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
S=bench/results/2026-12-04_s24
C="128,160,64,2,1,64,160,0,0,0,1,-1,4,3;128,160,64,2,1,64,160,0,0,0,1,-1,6,3;64,160,64,1,1,64,160,0,0,0,1,-1,8,20;128,224,64,2,1,64,224,0,0,0,1,-1,4,3;128,224,64,2,1,64,224,0,0,0,1,-1,5,3;64,224,64,1,1,64,224,0,0,0,1,-1,6,20;128,160,64,2,1,64,160,0,0,0,1,-1,4,1;128,224,64,2,1,64,224,0,0,0,1,-1,4,1"
timeout 230 python bench/time_configs.py --suite $S/wide_lines.txt --only _ --configs "$C" --out $O/wide.md --json $O/wide.json > $O/wide.txt 2>&1
pack
C="128,96,64,2,1,64,96,0,0,0,1,-1,7,3;128,96,64,2,1,64,96,0,0,0,1,-1,4,3;128,128,64,2,1,64,128,0,0,0,1,-1,6,3;128,64,64,2,1,64,64,0,0,0,1,-1,8,3;64,128,64,1,1,64,128,0,0,0,1,-1,8,20;64,96,64,1,1,64,96,0,0,0,1,-1,8,20;128,192,64,2,1,64,192,0,0,0,1,-1,5,3"
timeout 330 python bench/time_configs.py --suite $S/pw_slow.txt --only _ --configs "$C" --out $O/pw.md --json $O/pw.json > $O/pw.txt 2>&1
pack
