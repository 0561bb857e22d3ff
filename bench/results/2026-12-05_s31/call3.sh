#!/usr/bin/env bash
# Call 3: ncu of the NCHW-dX TMA kernel, element stores (base 03a47d5) against the staged
# epilogue (tree), and the NHWC kernel of the same line, DeepLabv3 ASPP 1x1 and U-Net inc.conv2.
# Base: mkdir -p $S/base && git archive 03a47d5 miopen_solver driver $(git ls-files 'bench/*.py') bench/zoo.txt | tar -x -C $S/base
# (made before the call, deleted after); the tree had staged_nchw_dx.patch applied.
set -u
R=$(pwd); S=$R/bench/results/2026-12-05_s31; O=${OUT:-/tmp/o3}; mkdir -p $O
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_requests_srcunit_tex_op_write.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio
A="convfp16 -n 16 -c 2048 -H 33 -W 33 -k 256 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 -g 1 -F 2 -t 1 -V 1"
U="convfp16 -n 8 -c 64 -H 256 -W 256 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -g 1 -F 2 -t 1 -V 1"
for L in "$A" "$U"; do
  for lay in NCHW NHWC; do
    ln="$L --in_layout $lay --out_layout $lay --fil_layout $lay"
    echo "== new $lay: $ln" >> $O/ncu.txt
    timeout 100 ncu --clock-control none -k regex:dgrad_sm --metrics $M python bench/profile_one.py "$ln" 2>&1 | grep -v "^==PROF==" | tail -22 >> $O/ncu.txt
  done
  echo "== base NCHW" >> $O/ncu.txt
  (cd $S/base && PYTHONPATH=. timeout 100 ncu --clock-control none -k regex:dgrad_sm --metrics $M python bench/profile_one.py "$L --in_layout NCHW --out_layout NCHW --fil_layout NCHW" 2>&1 | grep -v "^==PROF==" | tail -22 >> $O/ncu.txt)
done
cat $O/ncu.txt | grep -E "==|duration|dram__bytes|lts__t_s|lts__t_r|requests|stalled|warps_active" | sed 's/  */ /g'
