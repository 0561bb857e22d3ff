# Schedule 18 (NCHW pointwise on the persistent wgmma main loop): GPU tests, then each NCHW 1x1
# line's default tile on schedules 8 and 18 and two fixed persistent tiles, with cuDNN (NCHW).
set -x
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
O=/tmp/o5; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
DGRAD_GPU_EXAMPLES=20 timeout 150 python -m pytest -q tests/test_gpu.py -k "nchw_pointwise" > $O/gpu_tests.txt 2>&1; echo "rc=$?" >> $O/gpu_tests.txt
pack
timeout 330 python bench/time_configs.py --suite bench/results/2026-12-04_s20/pw_nchw.txt --only _ \
  --configs "default@8;default@18;128,128,64,2,1,64,128,0,0,0,1,-1,3,18;64,256,64,1,1,64,256,0,0,0,1,-1,3,18" \
  --out $O/pw18.md --json $O/pw18.json > $O/pw18.txt 2>&1
pack
