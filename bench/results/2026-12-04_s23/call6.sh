# The tree that lands (the model's ping-pong scale of call 5 not shipped): the suite in fp16 and
# bf16 against cuDNN.
set -x
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o6; mkdir -p $O
timeout 200 python bench/compare.py --suite bench/suite.txt --dtypes fp16,bf16 --out $O/suite_fp16_bf16.md --json $O/suite_fp16_bf16.json > $O/suite_fp16_bf16.txt 2>&1
tar czf $OUT/all.tgz -C $O .
