#!/usr/bin/env bash
# Call 6 (not run in the thirty-first session: no device time left): the staged NCHW-dX
# epilogue's later forms against the element stores of the tree, on the 43 NCHW zoo lines of
# call 2: base first (the device copy as sent), then staged_nchw_dx_v2.patch (row flags in one
# word, the store loop not unrolled), then staged_nchw_dx_v3.patch (branch-free stores, one
# pointer step a channel), each applied to the base; then v3's GPU tests.
set -u
R=$(pwd); S=$R/bench/results/2026-12-05_s31; O=${OUT:-/tmp/o6}; mkdir -p $O
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
nvidia-smi --query-gpu=name --format=csv,noheader > $O/gpu.txt
L=$S/nchw_staged_lines.txt
timeout 100 python bench/compare.py --suite $L --dtypes line --layout NCHW --json $O/base.json --out $O/base.md > $O/log.txt 2>&1
# (the device copy's git HEAD is not the tree sent: patches are applied and reversed, never checked out)
for v in v2 v3; do
  git apply $S/staged_nchw_dx_$v.patch || exit 3
  timeout 120 python bench/compare.py --suite $L --dtypes line --layout NCHW --json $O/$v.json --out $O/$v.md >> $O/log.txt 2>&1
  [ $v = v3 ] || git apply -R $S/staged_nchw_dx_$v.patch || exit 4
done
grep -h "geometric" $O/base.md $O/v2.md $O/v3.md
DGRAD_GPU_EXAMPLES=4 timeout 100 python -m pytest -q -x tests/test_gpu.py \
  -k "tma_nchw_dx_verifies_element_by_element or nchw_dx_split_n or pingpong_bf16_and_nchw" > $O/tests.txt 2>&1; tail -2 $O/tests.txt
