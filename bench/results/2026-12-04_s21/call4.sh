# Schedule 19 with the taps and dY loads issued first: GPU tests (fp16 and random); the 24
# direct-default lines in NCHW against cuDNN; a 20-config tune of the 7x7 and 14x14 lines in
# NCHW (the plane search space first).
set -x
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o4; mkdir -p $O
D=bench/results/2026-12-04_s21
pack() { tar czf $OUT/all.tgz -C $O . ; }
DGRAD_GPU_EXAMPLES=8 timeout 120 python -m pytest -q -x tests/test_gpu.py -k "direct_plane and (random or fp16 or fp32)" > $O/gpu_tests.txt 2>&1; echo "rc=$?" >> $O/gpu_tests.txt
pack
timeout 100 python bench/compare.py --suite $D/direct_lines.txt --dtypes line --layout NCHW --out $O/nchw.md --json $O/nchw.json > $O/nchw.txt 2>&1
pack
sed 's/NHWC/NCHW/g; s/ -F 2 / -F 2 -J 1 /' $D/small_lines.txt > $O/tune_lines.txt
timeout -s INT -k 20 230 python -m driver tune --file $O/tune_lines.txt --max-configs 20 --gpus all --compile-pool 14 \
   --verify-top 1 --quiet --results $O/tune.jsonl > $O/tune.txt 2>&1; echo "rc=$?" >> $O/tune.txt
python bench/default_vs_tuned.py $O/tune.jsonl --suite $O/tune_lines.txt --out $O/dvt.md --json $O/dvt.json > $O/dvt.txt 2>&1
pack
