# The mma body on persistent blocks (vector_size_a 3) and its cheaper band-table build, first
# run on a GPU: GPU tests of every mma form (one tile a block, persistent, NCHW in place);
# every fixture on the GPU (the direct kernels' texts changed: a shared unit decode); then the
# large-filter depthwise layers timed: the lean default, the four best mma tiles of the
# fifteenth session one tile a block (2: now with the new band build) and on persistent
# blocks (3), fp16, with cuDNN and the bandwidth floor in the same run. Then the whole zoo
# (not re-timed since the twenty-sixth session's two default changes).
set -x
O=/tmp/o1; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
git log -1 --format=%H > $O/commit.txt 2>&1
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "mma_persistent or mma_body or direct_nchw_verifies" > $O/gpu.txt 2>&1; echo "rc=$?" >> $O/gpu.txt
pack
timeout 120 python -m driver replay fixtures/ --backend cuda > $O/replay.txt 2>&1; echo "rc=$?" >> $O/replay.txt
pack
timeout 220 python bench/direct_h200.py --dtypes fp16 --only "dw5x5,dw7x7,d2" --policies v8_p8x1_t128_l1_s1_lean \
    --configs "32,16,16,4,1,16,8,2,0,8,1,1,1,4;64,16,16,8,1,16,8,2,0,8,1,1,1,4;64,16,8,4,1,16,8,2,0,8,1,1,1,4;32,32,16,8,1,16,8,2,0,8,1,1,1,4;32,16,16,4,1,16,8,3,0,8,1,1,1,4;64,16,16,8,1,16,8,3,0,8,1,1,1,4;64,16,8,4,1,16,8,3,0,8,1,1,1,4;32,32,16,8,1,16,8,3,0,8,1,1,1,4" \
    --out $O/mma > $O/mma.txt 2>&1; echo "rc=$?" >> $O/mma.txt
pack
timeout 170 python bench/compare.py --suite bench/zoo.txt --dtypes line --json $O/zoo.json --out $O/zoo.md > $O/zoo.txt 2>&1
pack
