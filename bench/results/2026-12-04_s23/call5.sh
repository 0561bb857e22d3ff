# The cost model timing one-warpgroup TMA tiles in their ping-pong form (cost_model.PINGPONG_SCALE):
# base (HEAD 64341b7, base/) against the new tree (new/: a snapshot of the working tree)
# alternating on the lines whose default moved and a third held-out set; then at the new tree
# the GPU tests of the defaults' helpers, run --json on the GPU, the suite in bf16 and fp32, in
# MIOpen's NCHW layout and as written, against cuDNN.
set -x
O=/tmp/o5; mkdir -p $O
D=$PWD/bench/results/2026-12-04_s23
pack() { tar czf $OUT/all.tgz -C $O . ; }
date +%s > $O/t0
cat $D/pp_model_lines.txt bench/pingpong_heldout3.txt > /tmp/lines.txt
cd $D/new
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
for v in base new base new; do
  if [ $v = base ]; then (cd $D/base && MIOPEN_DGRAD_CACHE_DIR=/tmp/kcb timeout 110 python bench/compare.py --suite /tmp/lines.txt --dtypes line --out $O/ab_$v.md --json $O/ab_$v.json > /dev/null 2>&1)
  else timeout 110 python bench/compare.py --suite /tmp/lines.txt --dtypes line --out $O/ab_$v.md --json $O/ab_$v.json > /dev/null 2>&1; fi
  mv $O/ab_$v.json $O/ab_${v}_$(date +%s).json; date +%s >> $O/t0; pack
done
timeout 100 python -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "short_k_default or pingpong_default or sub_wave_default" > $O/gpu_tests.txt 2>&1; echo "rc=$?" >> $O/gpu_tests.txt
date +%s >> $O/t0; pack
timeout 40 python -m driver convfp16 -n 48 -c 128 -H 28 -W 28 -k 512 -y 1 -x 1 -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC -t 1 -V 1 --backend cuda --json > $O/run_json.txt 2>&1; echo "rc=$?" >> $O/run_json.txt
timeout 60 python -m driver replay fixtures/ --backend cuda > $O/replay_cuda.txt 2>&1; echo "rc=$?" >> $O/replay_cuda.txt
date +%s >> $O/t0; pack
timeout 80 python bench/compare.py --suite bench/suite.txt --dtypes line --out $O/suite.md --json $O/suite.json > $O/suite.txt 2>&1
date +%s >> $O/t0; pack
timeout 120 python bench/compare.py --suite bench/suite.txt --dtypes bf16,fp32 --out $O/suite_bf16_fp32.md --json $O/suite_bf16_fp32.json > $O/suite_bf16_fp32.txt 2>&1
date +%s >> $O/t0; pack
timeout 90 python bench/compare.py --suite bench/suite.txt --dtypes line --layout NCHW --out $O/suite_nchw.md --json $O/suite_nchw.json > $O/suite_nchw.txt 2>&1
date +%s >> $O/t0; pack
