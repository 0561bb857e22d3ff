# Ping-pong schedule (20) with the producer warpgroup and setmaxnreg, the tree to land: fixtures
# replayed on the GPU; the zoo's other GEMM classes (lines not in call 3) timed at the default and
# four ping-pong tiles, cuDNN in the same process.
set -x
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o4; mkdir -p $O
D=bench/results/2026-12-04_s22
PP="128,128,64,1,1,128,128,0,0,0,1,-1,6,20;64,256,64,1,1,64,256,0,0,0,1,-1,5,20;64,128,64,1,1,64,128,0,0,0,1,-1,8,20;128,64,64,1,1,128,64,0,0,0,1,-1,8,20"
pack() { tar czf $OUT/all.tgz -C $O . ; }
date +%s > $O/t0
timeout 120 python -m driver replay fixtures/ --backend cuda > $O/replay_cuda.txt 2>&1; echo "rc=$?" >> $O/replay_cuda.txt
date +%s >> $O/t0; pack
timeout 290 python bench/time_configs.py --suite $D/pp_lines_b.txt --only _ --configs "$PP" \
  --out $O/zoo_b_pp.md --json $O/zoo_b_pp.json > $O/zoo_b_pp.txt 2>&1
date +%s >> $O/t0; pack
