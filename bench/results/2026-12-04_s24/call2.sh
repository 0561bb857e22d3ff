# Why memory-bound pointwise (1x1) GEMMs run at 0.6-0.8 of cuBLAS (s24): ncu of our default
# kernel and of cuBLAS's kernel for the same GEMM dX[N*H*W, C] = dY[N*H*W, K] x W[K, C] on four
# zoo lines (fp16, NHWC).
set -x
O=/tmp/o2; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
SECS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats"
i=0
while read -r n c h k; do
  i=$((i+1))
  L="convfp16 -n $n -c $c -H $h -W $h -k $k -y 1 -x 1 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 -g 1 -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"
  python -m driver config "$L" --arch sm_90 > $O/cfg_$i.txt 2>&1
  timeout 60 ncu --clock-control none -k regex:dgrad_sm $SECS python bench/profile_one.py "$L" > $O/ncu_ours_$i.txt 2>&1
  timeout 60 ncu --clock-control none -k regex:"gemm|sm90|cutlass|nvjet" $SECS python -c "
import torch
M=$n*$h*$h; a=torch.randn(M,$k,device='cuda',dtype=torch.half); b=torch.randn($k,$c,device='cuda',dtype=torch.half)
torch.matmul(a,b); torch.cuda.synchronize()
" > $O/ncu_blas_$i.txt 2>&1
  pack
done <<'LINES'
64 80 14 480
64 512 7 2048
64 320 7 1280
64 672 14 112
LINES
