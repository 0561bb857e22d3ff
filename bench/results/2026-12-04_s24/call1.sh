# Ping-pong defaults on NCHW problems store dX NCHW from their epilogue (s24): GPU tests of the
# ping-pong defaults (each verified NHWC and NCHW), replay on the GPU, then base (0a22ac3:
# ping-pong + a dX transform) against the new tree (ping-pong + the NCHW-dX epilogue), each
# also timing its default tile on the cooperative TMA schedule (default@3), on the NCHW lines
# whose default is ping-pong.
set -x
O=/tmp/o1; mkdir -p $O
D=$PWD/bench/results/2026-12-04_s24
pack() { tar czf $OUT/all.tgz -C $O . ; }
date +%s > $O/t0
cd $D/new
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "pingpong_default or pingpong_bf16_and_nchw" > $O/gpu_tests.txt 2>&1; echo "rc=$?" >> $O/gpu_tests.txt
date +%s >> $O/t0; pack
timeout 90 python -m driver replay fixtures/ --backend cuda > $O/replay_cuda.txt 2>&1; echo "rc=$?" >> $O/replay_cuda.txt
date +%s >> $O/t0; pack
for v in base new; do
  if [ $v = base ]; then (cd $D/base && MIOPEN_DGRAD_CACHE_DIR=/tmp/kcb timeout 170 python bench/time_configs.py --suite $D/nchw_pingpong.txt --only _ --configs "default@3" --out $O/ab_$v.md --json $O/ab_$v.json > $O/ab_$v.txt 2>&1)
  else timeout 170 python bench/time_configs.py --suite $D/nchw_pingpong.txt --only _ --configs "default@3" --out $O/ab_$v.md --json $O/ab_$v.json > $O/ab_$v.txt 2>&1; fi
  date +%s >> $O/t0; pack
done
