# Schedule 19 whole planes on persistent blocks (stages 2, the next plane block's loads in
# flight): GPU tests; the 11 small-plane lines on the default, persistent and row-staged forms.
set -x
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o5; mkdir -p $O
D=bench/results/2026-12-04_s21
pack() { tar czf $OUT/all.tgz -C $O . ; }
DGRAD_GPU_EXAMPLES=8 timeout 150 python -m pytest -q -x tests/test_gpu.py -k "direct_plane and (random or fp16 or persistent)" > $O/gpu_tests.txt 2>&1; echo "rc=$?" >> $O/gpu_tests.txt
pack
timeout 150 python $D/plane_variants.py $D/small_lines.txt $O/variants.json > $O/variants.txt 2>&1
pack
