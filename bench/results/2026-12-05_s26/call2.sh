# (1) the sub-pixel GEMM on the ping-pong main loop (schedule 22, new) timed on 25 strided
# lines (the zoo's 13 and 12 held-out) against each line's default, the sub-pixel TMA form
# (17) and cuDNN; (2) the patch lines' defaults against cuDNN and cuBLAS on the same GEMM.
set -x
O=/tmp/o2; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
D=bench/results/2026-12-05_s26
C="128,128,64,1,1,128,128,0,0,0,1,-1,7,22;64,128,64,1,1,64,128,0,0,0,1,-1,8,22;128,64,64,1,1,128,64,0,0,0,1,-1,8,22;64,256,64,1,1,64,256,0,0,0,1,-1,5,22;256,128,64,2,1,128,128,0,0,0,1,-1,4,17"
for s in 0 1; do
  timeout 200 python bench/time_configs.py --suite $D/strided_lines.txt --only _ --shard $s/2 --configs "$C" --out $O/strided_$s.md --json $O/strided_$s.json > $O/strided_$s.txt 2>&1
  pack
done
timeout 150 python bench/patch_h200.py --zoo $D/patch_lines.txt --json $O/patch_blas.json > $O/patch_blas.md 2>&1
pack
