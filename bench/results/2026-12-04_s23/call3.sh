# The refined ping-pong form (one-warpgroup TMA tiles of stride-1 problems whose blocks fit at
# most two a multiprocessor): GPU tests of its defaults, replay on the GPU, base (ddf341b,
# base/) against the new tree (new/: a snapshot of the working tree) alternating on the moved
# zoo/suite lines and both held-out sets, then the whole zoo and the suite at the new tree
# against cuDNN.
set -x
O=/tmp/o3; mkdir -p $O
D=$PWD/bench/results/2026-12-04_s23
pack() { tar czf $OUT/all.tgz -C $O . ; }
date +%s > $O/t0
cat $D/pp_default_lines.txt $D/new/bench/pingpong_heldout.txt $D/new/bench/pingpong_heldout2.txt > /tmp/lines.txt
cd $D/new
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
timeout 100 python -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "pingpong_default" > $O/gpu_tests.txt 2>&1; echo "rc=$?" >> $O/gpu_tests.txt
date +%s >> $O/t0; pack
timeout 80 python -m driver replay fixtures/ --backend cuda > $O/replay_cuda.txt 2>&1; echo "rc=$?" >> $O/replay_cuda.txt
date +%s >> $O/t0; pack
for v in base new base new; do
  if [ $v = base ]; then (cd $D/base && MIOPEN_DGRAD_CACHE_DIR=/tmp/kcb timeout 100 python bench/compare.py --suite /tmp/lines.txt --dtypes line --out $O/ab_$v.md --json $O/ab_$v.json > /dev/null 2>&1)
  else timeout 100 python bench/compare.py --suite /tmp/lines.txt --dtypes line --out $O/ab_$v.md --json $O/ab_$v.json > /dev/null 2>&1; fi
  mv $O/ab_$v.json $O/ab_${v}_$(date +%s).json; date +%s >> $O/t0; pack
done
timeout 80 python bench/compare.py --suite bench/suite.txt --dtypes line --out $O/suite.md --json $O/suite.json > $O/suite.txt 2>&1
date +%s >> $O/t0; pack
timeout 240 python bench/compare.py --suite bench/zoo.txt --dtypes line --out $O/zoo.md --json $O/zoo.json > $O/zoo.txt 2>&1
date +%s >> $O/t0; pack
