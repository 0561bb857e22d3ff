# The producer warpgroup on the TMA schedules' 256-thread blocks, the tree to land: the fixtures
# replayed on the GPU, then the TMA families' GPU tests call 5 did not reach.
set -x
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o6; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
date +%s > $O/t0
timeout 90 python -m driver replay fixtures/ --backend cuda > $O/replay_cuda.txt 2>&1; echo "rc=$?" >> $O/replay_cuda.txt
date +%s >> $O/t0; pack
timeout 170 python -m pytest -q tests/test_gpu.py -k "tma_split_k_blocks_walk or stream_k_on_three_sms or subpixel_gemm_verifies or patch_gemm_verifies or nchw_tma or overlapped_launches or nchw_and_mixed" > $O/gpu_tests.txt 2>&1; echo "rc=$?" >> $O/gpu_tests.txt
date +%s >> $O/t0; pack
