#!/usr/bin/env bash
# Call 4: NCHW dX through the transform after the kernel (transpose.splits_sectors, every size)
# against the TMA epilogue's element stores, on the 22 NCHW zoo lines whose default changes;
# the base and the tree alternate twice. Then the GPU tests of the NCHW-dX paths.
set -u
R=$(pwd); S=$R/bench/results/2026-12-05_s31; O=${OUT:-/tmp/o4}; mkdir -p $O
# Base: mkdir -p $S/base && git archive 79d3872 miopen_solver driver $(git ls-files 'bench/*.py') bench/zoo.txt | tar -x -C $S/base
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
nvidia-smi --query-gpu=name --format=csv,noheader > $O/gpu.txt
L=$S/split_sector_lines.txt
for run in 1 2; do
  (cd $S/base && PYTHONPATH=. timeout 100 python bench/compare.py --suite $L --dtypes line --layout NCHW \
    --json $O/base$run.json --out $O/base$run.md > $O/base_log$run.txt 2>&1)
  timeout 100 python bench/compare.py --suite $L --dtypes line --layout NCHW --json $O/new$run.json --out $O/new$run.md > $O/new_log$run.txt 2>&1
done
grep -h "geometric" $O/base1.md $O/new1.md $O/base2.md $O/new2.md
DGRAD_GPU_EXAMPLES=4 timeout 150 python -m pytest -q -x tests/test_gpu.py \
  -k "nchw_dx_from_the_epilogue or nchw_and_mixed" > $O/tests.txt 2>&1; tail -3 $O/tests.txt
