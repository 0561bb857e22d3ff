# The state of the product at the session's tree, for the three open issues' notes: the
# persistent mma GPU tests call 1 did not reach (its 130 s ran out inside them), the suite,
# the whole zoo with every tensor NCHW (MIOpen's default layout; issue 16; last timed in the
# twentieth session), and the zoo's patch lines against cuDNN and cuBLAS on the same GEMM
# (issue 14).
set -x
O=/tmp/o2; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
git log -1 --format=%H > $O/commit.txt 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/smi.txt 2>&1
date +%s > $O/t0
timeout 120 python -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "mma_persistent" > $O/gpu.txt 2>&1; echo "rc=$?" >> $O/gpu.txt
date +%s >> $O/t0; pack
timeout 60 python bench/compare.py --suite bench/suite.txt --dtypes line --json $O/suite.json --out $O/suite.md > $O/suite.txt 2>&1
date +%s >> $O/t0; pack
timeout 220 python bench/compare.py --suite bench/zoo.txt --dtypes line --layout NCHW --json $O/zoo_nchw.json --out $O/zoo_nchw.md > $O/zoo_nchw.txt 2>&1
date +%s >> $O/t0; pack
timeout 130 python bench/patch_h200.py --json $O/patch.json > $O/patch.txt 2>&1; echo "rc=$?" >> $O/patch.txt
date +%s >> $O/t0; pack
