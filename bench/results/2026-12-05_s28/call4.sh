# Issue 16: the cost model also picks the kernel's tile where the kernel stores an NCHW dX
# (MIOpen's default layout), among the schedules that store it so. The 37 zoo and suite lines
# whose NCHW default moves (nchw_moved.txt), every tensor NCHW, cuDNN in the same process:
# the session's base tree (.ab/base, HEAD's code) then the new tree; then every moved line
# run and verified by the driver at its new default.
set -x
O=/tmp/o4; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
export MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
R=$PWD; S=$R/bench/results/2026-12-05_s28/nchw_moved.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/smi.txt 2>&1
date +%s > $O/t0
(cd .ab/base && PYTHONPATH=. timeout 110 python bench/compare.py --suite $S --dtypes line --layout NCHW --json $O/base.json --out $O/base.md > $O/base.txt 2>&1)
date +%s >> $O/t0; pack
PYTHONPATH=. timeout 110 python bench/compare.py --suite $S --dtypes line --layout NCHW --json $O/new.json --out $O/new.md > $O/new.txt 2>&1
date +%s >> $O/t0; pack
PYTHONPATH=. timeout 120 python -m driver batch $S --backend cuda --iters 1 --csv $O/batch.csv > $O/batch.txt 2>&1; echo "rc=$?" >> $O/batch.txt
date +%s >> $O/t0; pack
