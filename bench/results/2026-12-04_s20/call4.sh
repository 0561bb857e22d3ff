# The shipped PDL variant (early trigger in the transforms and the W' pack only): GPU tests of
# every multi-launch path, the fixtures replayed on the GPU, the NCHW suite with PDL on and off.
set -x
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o4; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
DGRAD_GPU_EXAMPLES=6 timeout 200 python -m pytest -q tests/test_gpu.py -k "overlapped_launches or nchw_and_mixed or split_n_forced or subpixel or transpose_kernel or split_k_workspace" > $O/gpu_tests.txt 2>&1; echo "rc=$?" >> $O/gpu_tests.txt
pack
timeout 200 python -m driver replay fixtures/ --backend cuda > $O/replay_cuda.txt 2>&1; echo "rc=$?" >> $O/replay_cuda.txt
pack
for r in 1 2; do
  MIOPEN_DGRAD_PDL=0 timeout 80 python bench/compare.py --dtypes fp16 --layout NCHW --replays 25 --json $O/nchw_off_$r.json > /dev/null 2>&1
  timeout 80 python bench/compare.py --dtypes fp16 --layout NCHW --replays 25 --out $O/nchw_on_$r.md --json $O/nchw_on_$r.json > /dev/null 2>&1
done
pack
