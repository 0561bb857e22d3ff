set -x
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
timeout 170 python -m pytest -q -x tests/test_gpu.py -k "overlapped_launches or nchw_and_mixed or split_n_forced" > $O/gpu_tests.txt 2>&1; echo "rc=$?" >> $O/gpu_tests.txt
pack
MIOPEN_DGRAD_PDL=0 timeout 130 python bench/compare.py --dtypes fp16 --layout NCHW --out $O/nchw_off.md --json $O/nchw_off.json > $O/nchw_off.txt 2>&1
pack
timeout 130 python bench/compare.py --dtypes fp16 --layout NCHW --out $O/nchw_on.md --json $O/nchw_on.json > $O/nchw_on.txt 2>&1
pack
timeout 100 python bench/compare.py --dtypes fp16 --layout NHWC --out $O/nhwc.md --json $O/nhwc.json > $O/nhwc.txt 2>&1
pack
