# The ping-pong form of one-warpgroup TMA defaults (heuristics.pingpong_form): GPU tests of the
# new defaults; replay of the fixtures on the GPU; base (ddf341b, base/) against the new tree in
# one process per run, alternating, on the zoo/suite lines whose default moved and on 37
# held-out re-batched zoo layers; ping-pong at shallower stage counts on the same lines.
set -x
export MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o2; mkdir -p $O
D=bench/results/2026-12-04_s23
pack() { tar czf $OUT/all.tgz -C $O . ; }
date +%s > $O/t0
cat $D/pp_default_lines.txt bench/pingpong_heldout.txt > /tmp/lines.txt
PYTHONPATH=. timeout 150 python -m pytest -q tests/test_gpu.py -k "pingpong_default" > $O/gpu_tests.txt 2>&1; echo "rc=$?" >> $O/gpu_tests.txt
date +%s >> $O/t0; pack
PYTHONPATH=. timeout 80 python -m driver replay fixtures/ --backend cuda > $O/replay_cuda.txt 2>&1; echo "rc=$?" >> $O/replay_cuda.txt
date +%s >> $O/t0; pack
for v in base new base new; do
  if [ $v = base ]; then (cd $D/base && PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kcb timeout 90 python bench/compare.py --suite /tmp/lines.txt --dtypes line --out $O/ab_$v.md --json $O/ab_$v.json > /dev/null 2>&1)
  else PYTHONPATH=. timeout 90 python bench/compare.py --suite /tmp/lines.txt --dtypes line --out $O/ab_$v.md --json $O/ab_$v.json > /dev/null 2>&1; fi
  mv $O/ab_$v.json $O/ab_${v}_$(date +%s).json; date +%s >> $O/t0; pack
done
PYTHONPATH=. timeout 150 python bench/time_configs.py --suite /tmp/lines.txt --only _ \
  --configs "128,128,64,1,1,128,128,0,0,0,1,-1,6,20;64,128,64,1,1,64,128,0,0,0,1,-1,6,20;64,64,64,1,1,64,64,0,0,0,1,-1,6,20" \
  --out $O/stages.md --json $O/stages.json > $O/stages.txt 2>&1
date +%s >> $O/t0; pack
