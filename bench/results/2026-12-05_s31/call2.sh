#!/usr/bin/env bash
# Thirty-first session, call 2: the staged NCHW-dX epilogue of the TMA schedules on the GPU.
# Correct first (GPU tests of every NCHW-dX epilogue, the fixtures), then base (03a47d5) and
# new on the 43 NCHW zoo lines whose default now stages dX, and new in NHWC (our NCHW/NHWC).
# Base: mkdir -p $S/base && git archive 03a47d5 miopen_solver driver $(git ls-files 'bench/*.py') bench/zoo.txt | tar -x -C $S/base
# (made before the call, deleted after); the tree had staged_nchw_dx.patch applied.
set -u
R=$(pwd); S=$R/bench/results/2026-12-05_s31; O=${OUT:-/tmp/o2}; mkdir -p $O
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
nvidia-smi --query-gpu=name --format=csv,noheader > $O/gpu.txt
DGRAD_GPU_EXAMPLES=4 timeout 170 python -m pytest -q -x tests/test_gpu.py \
  -k "tma_nchw_dx_verifies_element_by_element or nchw_dx_split_n or pingpong_bf16_and_nchw" > $O/tests.txt 2>&1
tail -3 $O/tests.txt
timeout 90 python -m driver replay fixtures/ --backend cuda > $O/replay.txt 2>&1; tail -2 $O/replay.txt
(cd $S/base && PYTHONPATH=. timeout 120 python bench/compare.py --suite $S/nchw_staged_lines.txt --dtypes line --layout NCHW \
  --json $O/base_nchw.json --out $O/base_nchw.md > $O/base_log.txt 2>&1)
timeout 120 python bench/compare.py --suite $S/nchw_staged_lines.txt --dtypes line --layout NCHW \
  --json $O/new_nchw.json --out $O/new_nchw.md > $O/new_log.txt 2>&1
timeout 100 python bench/compare.py --suite $S/nchw_staged_lines.txt --dtypes line --layout NHWC \
  --json $O/new_nhwc.json --out $O/new_nhwc.md > $O/nhwc_log.txt 2>&1
grep -h "geometric" $O/*_nchw.md $O/new_nhwc.md
