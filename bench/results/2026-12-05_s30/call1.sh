# Thirtieth session, call 1: the explicit 16-/8-byte dX stores (dg_store16/dg_store8) of the TMA
# direct epilogue and the NCHW patch epilogue. sm_90 SASS (store_sass.py, local) showed the
# patch GEMM's 16-byte chunks compiled to four 4-byte STGs (schedule 21, NHWC) and the NCHW
# patch runs to 4-byte STGs (schedule 8); with the change both are STG.128 (STG.64 for 4-wide
# runs). Correctness first (GPU tests of every epilogue the change touches, then every fixture
# on the GPU), then base (9b7b98f, a copy in base/) and new in one call: the patch lines NHWC
# against cuDNN and cuBLAS (patch_h200.py), and the NCHW patch lines.
set -x
O=/tmp/o1; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
export MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
R=$PWD; S=$R/bench/results/2026-12-05_s30
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/smi.txt 2>&1
date +%s > $O/t0
DGRAD_GPU_EXAMPLES=6 PYTHONPATH=. timeout 170 python -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "patch or subpixel or nchw_pointwise or nchw_tma or tma_verifies or pingpong_verifies or tma_nchw_dx" > $O/gpu.txt 2>&1; echo "rc=$?" >> $O/gpu.txt
date +%s >> $O/t0; pack
(cd $S/base && PYTHONPATH=. timeout 80 python bench/patch_h200.py --json $O/patch_base.json > $O/patch_base.md 2>&1)
date +%s >> $O/t0; pack
PYTHONPATH=. timeout 80 python bench/patch_h200.py --json $O/patch_new.json > $O/patch_new.md 2>&1
date +%s >> $O/t0; pack
(cd $S/base && PYTHONPATH=. timeout 45 python bench/compare.py --suite $S/nchw_patch.txt --dtypes line --layout NCHW --json $O/nchw_patch_base.json --out $O/nchw_patch_base.md > $O/nchw_patch_base.txt 2>&1)
date +%s >> $O/t0; pack
PYTHONPATH=. timeout 45 python bench/compare.py --suite $S/nchw_patch.txt --dtypes line --layout NCHW --json $O/nchw_patch_new.json --out $O/nchw_patch_new.md > $O/nchw_patch_new.txt 2>&1
date +%s >> $O/t0; pack
PYTHONPATH=. timeout 80 python -m driver replay fixtures/ --backend cuda > $O/replay.txt 2>&1; echo "rc=$?" >> $O/replay.txt
date +%s >> $O/t0; pack
