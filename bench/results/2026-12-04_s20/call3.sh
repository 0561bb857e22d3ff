# PDL trigger variants (A: wait + launch_dependents at every entry, as committed; B: wait only,
# the dependents launch as the primary's blocks exit; C: launch_dependents in the transpose
# kernels only), alternating on the NCHW suite; then nchw_dx_choice on the suite and the zoo.
set -x
export MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o3; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
R=$(pwd)
for v in B C; do rm -rf /tmp/v$v; cp -r $R /tmp/v$v; done
sed -i 's/griddepcontrol.wait;\\n\\tgriddepcontrol.launch_dependents;/griddepcontrol.wait;/' /tmp/vB/miopen_solver/kernels/*.cu
sed -i 's/griddepcontrol.wait;\\n\\tgriddepcontrol.launch_dependents;/griddepcontrol.wait;/' /tmp/vC/miopen_solver/kernels/dgrad.cu /tmp/vC/miopen_solver/kernels/direct.cu
grep -c launch_dependents /tmp/vB/miopen_solver/kernels/*.cu /tmp/vC/miopen_solver/kernels/*.cu > $O/variants.txt
for r in 1 2; do
  for v in A B C; do
    d=$R; [ $v != A ] && d=/tmp/v$v
    (cd $d && PYTHONPATH=$d timeout 90 python bench/compare.py --dtypes fp16 --layout NCHW --replays 25 --json $O/pdl_${v}_$r.json > /dev/null 2>&1)
  done
done
pack
export PYTHONPATH=.
timeout 120 python bench/nchw_dx_choice.py --suite bench/suite.txt --out $O/nchw_dx_suite.md --json $O/nchw_dx_suite.json > $O/nchw_dx_suite.txt 2>&1
pack
timeout 250 python bench/nchw_dx_choice.py --suite bench/zoo.txt --out $O/nchw_dx_zoo.md --json $O/nchw_dx_zoo.json > $O/nchw_dx_zoo.txt 2>&1
pack
