set -x
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o2; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
L="--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
i=0
for line in "convfp16 -n 64 -c 512 -H 64 -W 64 -k 512 -y 1 -x 1 -F 2 $L" \
            "convfp16 -n 32 -c 1024 -H 14 -W 14 -k 256 -y 1 -x 1 -F 2 $L" \
            "convfp16 -n 64 -c 3 -H 224 -W 224 -k 768 -y 16 -x 16 -u 16 -v 16 -F 2 $L" \
            "convfp16 -n 64 -c 256 -H 64 -W 64 -k 256 -y 3 -x 3 -p 1 -q 1 -F 2 $L"; do
  i=$((i+1))
  timeout 60 ncu --clock-control none -k regex:dgrad_ --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats \
     python bench/profile_one.py "$line" > $O/ncu_$i.txt 2>&1
done
pack
for r in 1 2 3; do
  MIOPEN_DGRAD_PDL=0 timeout 80 python bench/compare.py --dtypes fp16 --layout NCHW --replays 25 --json $O/nchw_off_$r.json > /dev/null 2>&1
  timeout 80 python bench/compare.py --dtypes fp16 --layout NCHW --replays 25 --json $O/nchw_on_$r.json > /dev/null 2>&1
done
pack
timeout 330 python bench/compare.py --suite bench/zoo.txt --dtypes line --layout NCHW --out $O/zoo_nchw.md --json $O/zoo_nchw.json > $O/zoo_nchw.txt 2>&1
pack
