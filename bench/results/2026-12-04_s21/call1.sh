# Schedule 19 (direct-plane, NCHW planes in place): GPU tests; the zoo's 24 direct-default
# lines in NCHW (plane default) and NHWC (direct default) against cuDNN; a 40-config tune of
# the NCHW lines (the plane search space first).
set -x
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o1; mkdir -p $O
D=bench/results/2026-12-04_s21
pack() { tar czf $OUT/all.tgz -C $O . ; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $O/gpu.txt 2>&1
DGRAD_GPU_EXAMPLES=16 timeout 170 python -m pytest -q -x tests/test_gpu.py -k "direct_plane" > $O/gpu_tests.txt 2>&1; echo "rc=$?" >> $O/gpu_tests.txt
pack
timeout 100 python bench/compare.py --suite $D/direct_lines.txt --dtypes line --layout NCHW --out $O/nchw.md --json $O/nchw.json > $O/nchw.txt 2>&1
pack
timeout 100 python bench/compare.py --suite $D/direct_lines.txt --dtypes line --layout NHWC --out $O/nhwc.md --json $O/nhwc.json > $O/nhwc.txt 2>&1
pack
sed 's/NHWC/NCHW/g; s/ -F 2 / -F 2 -J 1 /' $D/direct_lines.txt > $O/tune_lines.txt
timeout -s INT -k 20 200 python -m driver tune --file $O/tune_lines.txt --max-configs 40 --gpus all --compile-pool 12 \
   --verify-top 1 --quiet --results $O/tune.jsonl > $O/tune.txt 2>&1; echo "rc=$?" >> $O/tune.txt
python bench/default_vs_tuned.py $O/tune.jsonl --suite $O/tune_lines.txt --out $O/dvt.md --json $O/dvt.json > $O/dvt.txt 2>&1
pack
