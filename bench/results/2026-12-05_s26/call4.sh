# The patch default on the ping-pong form (PATCH_PINGPONG_DEFAULT): GPU tests of the patch
# defaults and the ping-pong families, the fixtures of patch and ping-pong lines on the GPU,
# the patch lines against cuDNN and cuBLAS at the new defaults, and the whole zoo.
set -x
O=/tmp/o4; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
D=bench/results/2026-12-05_s26
git log -1 --format=%H > $O/commit.txt 2>&1
timeout 120 python -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "patch_gemm_verifies or pingpong_default" > $O/gpu.txt 2>&1; echo "rc=$?" >> $O/gpu.txt
pack
timeout 60 python -m driver replay fixtures/patch.jsonl fixtures/pingpong.jsonl --backend cuda > $O/replay.txt 2>&1; echo "rc=$?" >> $O/replay.txt
pack
timeout 100 python bench/patch_h200.py --zoo $D/patch_lines.txt --json $O/patch_blas.json > $O/patch_blas.md 2>&1
pack
timeout 200 python bench/compare.py --suite bench/zoo.txt --dtypes line --json $O/zoo.json --out $O/zoo.md > $O/zoo.txt 2>&1
pack
