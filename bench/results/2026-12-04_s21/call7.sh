# Final tree of schedule 19 (the whole-plane loop and its prefetches only on persistent grids): GPU
# tests of the plane schedule; the 24 direct-default lines in NCHW and NHWC against cuDNN in one
# call; replay of every fixture on the GPU.
set -x
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o7; mkdir -p $O
D=bench/results/2026-12-04_s21
pack() { tar czf $OUT/all.tgz -C $O . ; }
DGRAD_GPU_EXAMPLES=16 timeout 170 python -m pytest -q tests/test_gpu.py -k "direct_plane" > $O/gpu_tests.txt 2>&1; echo "rc=$?" >> $O/gpu_tests.txt
pack
timeout 80 python bench/compare.py --suite $D/direct_lines.txt --dtypes line --layout NCHW --out $O/nchw.md --json $O/nchw.json > $O/nchw.txt 2>&1
timeout 80 python bench/compare.py --suite $D/direct_lines.txt --dtypes line --layout NHWC --out $O/nhwc.md --json $O/nhwc.json > $O/nhwc.txt 2>&1
pack
pack
timeout 120 python -m driver replay fixtures/ --backend cuda > $O/replay_cuda.txt 2>&1; echo "rc=$?" >> $O/replay_cuda.txt
pack
