# The twenty-seventh session's call 1 (bench/results/2026-12-05_s27/call1.sh), reordered to fit
# one 600 s call: GPU tests of every mma form first (correctness before timing), then the
# large-filter depthwise layers (lean default vs four mma tiles, one tile a block (2) and on
# persistent blocks (3), fp16, cuDNN and the bandwidth floor in the same run), then the whole
# zoo at the current defaults, then every fixture on the GPU with what time is left.
set -x
O=/tmp/o1; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
git log -1 --format=%H > $O/commit.txt 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/smi.txt 2>&1
date +%s > $O/t0
timeout 130 python -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "mma_persistent or mma_body or direct_nchw_verifies" > $O/gpu.txt 2>&1; echo "rc=$?" >> $O/gpu.txt
date +%s >> $O/t0; pack
timeout 170 python bench/direct_h200.py --dtypes fp16 --only "dw5x5,dw7x7,d2" --policies v8_p8x1_t128_l1_s1_lean \
    --configs "32,16,16,4,1,16,8,2,0,8,1,1,1,4;64,16,16,8,1,16,8,2,0,8,1,1,1,4;64,16,8,4,1,16,8,2,0,8,1,1,1,4;32,32,16,8,1,16,8,2,0,8,1,1,1,4;32,16,16,4,1,16,8,3,0,8,1,1,1,4;64,16,16,8,1,16,8,3,0,8,1,1,1,4;64,16,8,4,1,16,8,3,0,8,1,1,1,4;32,32,16,8,1,16,8,3,0,8,1,1,1,4" \
    --out $O/mma > $O/mma.txt 2>&1; echo "rc=$?" >> $O/mma.txt
date +%s >> $O/t0; pack
timeout 190 python bench/compare.py --suite bench/zoo.txt --dtypes line --json $O/zoo.json --out $O/zoo.md > $O/zoo.txt 2>&1
date +%s >> $O/t0; pack
timeout 90 python -m driver replay fixtures/ --backend cuda > $O/replay.txt 2>&1; echo "rc=$?" >> $O/replay.txt
date +%s >> $O/t0; pack
