# The twenty-ninth session's call 1 (the asks before it got no machine; it runs at the commit in
# call1/commit.txt, after the NCHW patch, far-phase and TMA NCHW-dX-run changes). Correctness
# first: the new kernels' GPU tests (NCHW patch filters, NaN-poisoned dX against float64; the
# TMA schedules' NCHW dX runs, element by element). Then base (5ba253d's code, a copy in
# base/) and new in one call, every tensor NCHW: the zoo's patch lines (base: transposes around
# the patch GEMM; new: the NCHW pointwise schedules) and six lines with large NCHW dX (base:
# element-wise stores; new: runs of 8 pixels). Then every fixture on the GPU and, with what time
# is left, the zoo in MIOpen's default layout (compare.py rewrites its JSON after each row).
set -x
O=/tmp/o1; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
export MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
R=$PWD; S=$R/bench/results/2026-12-05_s29
git log -1 --format=%H > $O/commit.txt 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/smi.txt 2>&1
date +%s > $O/t0
DGRAD_GPU_EXAMPLES=10 PYTHONPATH=. timeout 110 python -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "nchw_patch or tma_nchw_dx_runs" > $O/gpu.txt 2>&1; echo "rc=$?" >> $O/gpu.txt
date +%s >> $O/t0; pack
for f in nchw_patch nchw_bigdx; do
  (cd $S/base && PYTHONPATH=. timeout 55 python bench/compare.py --suite $S/$f.txt --dtypes line --layout NCHW --json $O/${f}_base.json --out $O/${f}_base.md > $O/${f}_base.txt 2>&1)
  date +%s >> $O/t0; pack
  PYTHONPATH=. timeout 55 python bench/compare.py --suite $S/$f.txt --dtypes line --layout NCHW --json $O/${f}_new.json --out $O/${f}_new.md > $O/${f}_new.txt 2>&1
  date +%s >> $O/t0; pack
done
PYTHONPATH=. timeout 70 python -m driver replay fixtures/ --backend cuda > $O/replay.txt 2>&1; echo "rc=$?" >> $O/replay.txt
date +%s >> $O/t0; pack
PYTHONPATH=. timeout 170 python bench/compare.py --suite bench/zoo.txt --dtypes line --layout NCHW --json $O/zoo_nchw.json --out $O/zoo_nchw.md > $O/zoo_nchw.txt 2>&1
date +%s >> $O/t0; pack
