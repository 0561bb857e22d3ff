# Where the NCHW runs' time goes (issue 16): the twelve zoo lines whose NCHW run is slowest
# against our own NHWC run of the same problem in calls 1-2 (0.24-0.45), and one dense 3x3,
# each launch timed alone beside the whole run, the all-NHWC run and the bandwidth yardsticks.
set -x
O=/tmp/o3; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
git log -1 --format=%H > $O/commit.txt 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/smi.txt 2>&1
timeout 250 python bench/nchw_breakdown.py --suite bench/results/2026-12-05_s28/nchw_worst.txt --out $O/breakdown.md > $O/breakdown.txt 2>&1; echo "rc=$?" >> $O/breakdown.txt
pack
