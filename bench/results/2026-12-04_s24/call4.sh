# (Written in s24, not run: no device was lent after call 2.) The 160- and 224-column
# warpgroup tiles on the GPU: their GPU tests (-k wide: plain, persistent, TMA, ping-pong;
# NHWC and NCHW; NaN-poisoned dX), then timed against each line's default on the lines whose
# channels they fit (wide_lines.txt), and call3.sh's depth/width sweep of the short 1x1 lines.
set -x
O=/tmp/o4; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
D=bench/results/2026-12-04_s24
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "wide" > $O/gpu_wide.txt 2>&1; echo "rc=$?" >> $O/gpu_wide.txt
pack
timeout 300 python bench/time_configs.py --suite $D/wide_lines.txt --only _ --configs "128,160,64,2,1,64,160,0,0,0,1,-1,4,3;128,160,64,2,1,64,160,0,0,0,1,-1,6,3;64,160,64,1,1,64,160,0,0,0,1,-1,8,20;128,224,64,2,1,64,224,0,0,0,1,-1,4,3;128,224,64,2,1,64,224,0,0,0,1,-1,5,3;64,224,64,1,1,64,224,0,0,0,1,-1,6,20;128,160,64,2,1,64,160,0,0,0,1,-1,4,1;128,224,64,2,1,64,224,0,0,0,1,-1,4,1" --out $O/wide.md --json $O/wide.json > $O/wide.txt 2>&1
pack
