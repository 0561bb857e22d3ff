# The three short-K 1x1 zoo layers of odd channel counts (the last zoo layer under 0.7 of cuDNN
# among them) at candidate tiles: data for the next session, no default changed.
set -x
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o4; mkdir -p $O
D=bench/results/2026-12-04_s23
cd $D/new
timeout 200 python bench/time_configs.py --suite ../short_k_lines.txt --only _ \
  --configs "64,96,64,1,1,64,96,0,0,0,1,-1,8,20;64,128,64,1,1,64,128,0,0,0,1,-1,8,20;64,96,64,1,1,64,96,0,0,0,1,-1,4,3;128,96,64,2,1,64,96,0,0,0,2,-1,4,3;64,128,64,1,1,64,128,0,0,0,1,-1,4,3,3;64,96,64,1,1,64,96,0,0,0,1,-1,4,1;64,64,64,1,1,64,64,0,0,0,2,-1,4,1" \
  --out $O/short_k.md --json $O/short_k.json > $O/short_k.txt 2>&1
tar czf $OUT/all.tgz -C $O .
