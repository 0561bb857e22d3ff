# The cost model with the 128x160 tile among its candidates (tiles160.patch applied to the working
# tree, against base/ = 84feb3f without it): 15 moved zoo/suite/held-out lines and 20 new
# held-out lines (wide_all.txt), new and base alternating (compare.py, each in its own
# process), then each line's new default verified on the GPU (driver run -V 1).
# Before the call (here): D=bench/results/2026-12-05_s26; mkdir -p $D/base &&
#   git archive HEAD miopen_solver driver bench/compare.py | tar x -C $D/base && git apply $D/tiles160.patch
# After: git checkout miopen_solver/cost_model.py (unless shipped); rm -rf $D/base
set -x
O=/tmp/o5; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
export MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
D=bench/results/2026-12-05_s26
S=$PWD/$D/wide_all.txt
for r in 1 2; do
  PYTHONPATH=. timeout 80 python bench/compare.py --suite $S --dtypes line --json $O/new_$r.json > $O/new_$r.txt 2>&1
  pack
  (cd $D/base && PYTHONPATH=. timeout 80 python bench/compare.py --suite $S --dtypes line --json $O/base_$r.json > $O/base_$r.txt 2>&1)
  pack
done
grep -v '^#' $S | while IFS= read -r raw; do
  l="${raw%%#*}"
  echo "== ${raw#*#}" >> $O/verify.txt
  PYTHONPATH=. timeout 20 python -m driver $l --backend cuda -V 1 -i 1 2>&1 | grep -E "Verifies|FAILED|rror" | head -2 >> $O/verify.txt
done
pack
