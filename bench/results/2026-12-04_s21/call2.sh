# Schedule 19 with vector row staging and whole-plane staging: GPU tests; the 24 direct-default
# lines in NCHW against cuDNN; ncu on two lines (row staging, whole planes).
set -x
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o2; mkdir -p $O
D=bench/results/2026-12-04_s21
pack() { tar czf $OUT/all.tgz -C $O . ; }
DGRAD_GPU_EXAMPLES=16 timeout 170 python -m pytest -q -x tests/test_gpu.py -k "direct_plane" > $O/gpu_tests.txt 2>&1; echo "rc=$?" >> $O/gpu_tests.txt
pack
timeout 100 python bench/compare.py --suite $D/direct_lines.txt --dtypes line --layout NCHW --out $O/nchw.md --json $O/nchw.json > $O/nchw.txt 2>&1
pack
i=0
for line in "convfp16 -n 64 -c 32 -H 112 -W 112 -k 32 -y 3 -x 3 -p 1 -q 1 -g 32 -F 2" \
            "convfp16 -n 64 -c 960 -H 7 -W 7 -k 960 -y 3 -x 3 -p 1 -q 1 -g 960 -F 2" \
            "convfp16 -n 64 -c 576 -H 14 -W 14 -k 576 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -g 576 -F 2"; do
  i=$((i+1))
  timeout 60 ncu --clock-control none -k regex:dgrad_ --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy --section WarpStateStats \
     python bench/profile_one.py "$line" > $O/ncu_$i.txt 2>&1
done
pack
