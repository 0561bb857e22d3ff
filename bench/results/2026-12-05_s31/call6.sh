#!/usr/bin/env bash
# Call 6: the staged NCHW-dX epilogue, second form (staged_nchw_dx_v2.patch: row flags in one
# word, the store loop not unrolled; 1664 SASS instructions against the first form's 2344),
# against the element stores of the tree: the 43 NCHW zoo lines of call 2, base first (the
# device copy as sent), then the patch applied and its GPU tests.
set -u
R=$(pwd); S=$R/bench/results/2026-12-05_s31; O=${OUT:-/tmp/o6}; mkdir -p $O
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
nvidia-smi --query-gpu=name --format=csv,noheader > $O/gpu.txt
L=$S/nchw_staged_lines.txt
timeout 100 python bench/compare.py --suite $L --dtypes line --layout NCHW --json $O/base.json --out $O/base.md > $O/log.txt 2>&1
git apply $S/staged_nchw_dx_v2.patch || exit 3
timeout 120 python bench/compare.py --suite $L --dtypes line --layout NCHW --json $O/new.json --out $O/new.md >> $O/log.txt 2>&1
grep -h "geometric" $O/base.md $O/new.md
DGRAD_GPU_EXAMPLES=4 timeout 100 python -m pytest -q -x tests/test_gpu.py \
  -k "tma_nchw_dx_verifies_element_by_element or nchw_dx_split_n or pingpong_bf16_and_nchw" > $O/tests.txt 2>&1; tail -2 $O/tests.txt
