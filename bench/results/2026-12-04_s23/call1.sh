# Baseline at the tree the session starts from (ddf341b): the whole zoo and the suite at their
# defaults, cuDNN in the same process, both in CUDA graphs.
set -x
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o1; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
date +%s > $O/t0
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/smi.txt 2>&1
timeout 80 python bench/compare.py --suite bench/suite.txt --dtypes line --out $O/suite.md --json $O/suite.json > $O/suite.txt 2>&1
date +%s >> $O/t0; pack
timeout 480 python bench/compare.py --suite bench/zoo.txt --dtypes line --out $O/zoo.md --json $O/zoo.json > $O/zoo.txt 2>&1
date +%s >> $O/t0; pack
