# (1) GPU tests of the ping-pong patch GEMM (schedule 21, new) and of the 160/224-column
# warpgroup tiles (s24, never run on a GPU); (2) the patch lines timed: default, the ping-pong
# patch tiles and the TMA patch tiles, against cuDNN in one process (CUDA graphs).
set -x
O=/tmp/o1; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
D=bench/results/2026-12-05_s26
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
git log -1 --format=%H > $O/commit.txt 2>&1
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "pingpong_verify or patch_gemm_verifies" > $O/gpu_pp.txt 2>&1; echo "rc=$?" >> $O/gpu_pp.txt
pack
timeout 170 python -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "wide" > $O/gpu_wide.txt 2>&1; echo "rc=$?" >> $O/gpu_wide.txt
pack
C="128,128,64,1,1,128,128,0,0,0,1,-1,7,21;64,128,64,1,1,64,128,0,0,0,1,-1,8,21;128,64,64,1,1,128,64,0,0,0,1,-1,8,21;64,256,64,1,1,64,256,0,0,0,1,-1,5,21;128,128,64,1,1,128,128,0,0,0,1,-1,4,10;128,256,64,2,1,64,256,0,0,0,1,-1,4,10"
timeout 240 python bench/time_configs.py --suite $D/patch_lines.txt --only _ --configs "$C" --out $O/patch.md --json $O/patch.json > $O/patch.txt 2>&1
pack
