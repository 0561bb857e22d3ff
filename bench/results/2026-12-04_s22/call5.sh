# The TMA schedules' 256-thread blocks with a producer warpgroup and setmaxnreg (40 / 232
# registers) against the tree before (base/: 7b5283c, a producer warp, 168 registers): GPU tests
# of the TMA kernels; the suite and the zoo's 1x1/small-image lines at their defaults, base and
# new alternating, cuDNN in each run.
set -x
export MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o5; mkdir -p $O
D=bench/results/2026-12-04_s22
pack() { tar czf $OUT/all.tgz -C $O . ; }
date +%s > $O/t0
PYTHONPATH=. timeout 150 python -m pytest -q tests/test_gpu.py -k "test_tma_verifies or stream_k_verifies or tma_split_k_verifies" > $O/gpu_tests.txt 2>&1; echo "rc=$?" >> $O/gpu_tests.txt
date +%s >> $O/t0; pack
for v in base new base new; do
  if [ $v = base ]; then (cd $D/base && PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kcb timeout 60 python bench/compare.py --suite bench/suite.txt --dtypes line --out $O/suite_$v.md --json $O/suite_$v.json > /dev/null 2>&1)
  else PYTHONPATH=. timeout 60 python bench/compare.py --suite bench/suite.txt --dtypes line --out $O/suite_$v.md --json $O/suite_$v.json > /dev/null 2>&1; fi
  mv $O/suite_$v.json $O/suite_${v}_$(date +%s).json; date +%s >> $O/t0
done
pack
(cd $D/base && PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kcb timeout 110 python bench/compare.py --suite ../pp_lines_a.txt --dtypes line --out $O/zoo_a_base.md --json $O/zoo_a_base.json > $O/zoo_a_base.txt 2>&1)
date +%s >> $O/t0; pack
PYTHONPATH=. timeout 110 python bench/compare.py --suite $D/pp_lines_a.txt --dtypes line --out $O/zoo_a_new.md --json $O/zoo_a_new.json > $O/zoo_a_new.txt 2>&1
date +%s >> $O/t0; pack
