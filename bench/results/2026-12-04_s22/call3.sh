# Ping-pong schedule (20) with a producer warpgroup and setmaxnreg (40 / 232 registers): GPU tests; the suite and the zoo's 1x1 and small-image lines timed
# at the default and four ping-pong tiles, cuDNN in the same process.
set -x
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o3; mkdir -p $O
D=bench/results/2026-12-04_s22
PP="default;128,128,64,1,1,128,128,0,0,0,1,-1,6,20;64,256,64,1,1,64,256,0,0,0,1,-1,5,20;64,128,64,1,1,64,128,0,0,0,1,-1,8,20;128,64,64,1,1,128,64,0,0,0,1,-1,8,20"
pack() { tar czf $OUT/all.tgz -C $O . ; }
date +%s > $O/t0
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/smi.txt 2>&1
timeout 150 python -m pytest -q tests/test_gpu.py -k "pingpong" > $O/gpu_tests.txt 2>&1; echo "rc=$?" >> $O/gpu_tests.txt
date +%s >> $O/t0; pack
timeout 150 python bench/time_configs.py --suite bench/suite.txt --only _ --configs "${PP#default;}" \
  --out $O/suite_pp.md --json $O/suite_pp.json > $O/suite_pp.txt 2>&1
date +%s >> $O/t0; pack
timeout 220 python bench/time_configs.py --suite $D/pp_lines_a.txt --only _ --configs "${PP#default;}" \
  --out $O/zoo_a_pp.md --json $O/zoo_a_pp.json > $O/zoo_a_pp.txt 2>&1
date +%s >> $O/t0; pack
