# Call 2 (after call 1's A/B: the NCHW patch default 2.5x / 1.7x faster on the ConvNeXt stem
# and 2x2 merge, 5 % slower on ViT-B/16 at tile_m 64 -- since sized by the GEMM's rows -- and
# 17 % slower on the fp32 ViT stem; the TMA NCHW-dX runs 2-3x slower, reverted): (a) every
# tile the decision needs on six NCHW patch lines, the old transposing-path defaults and the
# NCHW pointwise tiles, same process; (b) every third zoo line (shard 0/3) in MIOpen's default
# NCHW and in NHWC, for NCHW/NHWC on one machine.
set -x
O=/tmp/o2; mkdir -p $O
pack() { tar czf $OUT/all.tgz -C $O . ; }
export PYTHONPATH=. MIOPEN_DGRAD_CACHE_DIR=/tmp/kc
S=bench/results/2026-12-05_s29
git log -1 --format=%H > $O/commit.txt 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/smi.txt 2>&1
date +%s > $O/t0
timeout 120 python bench/time_configs.py --suite $S/nchw_patch_tiles.txt --only _ \
  --configs "128,128,64,1,1,128,128,0,0,0,1,-1,7,21;128,64,64,2,1,64,64,0,0,0,1,-1,4,6;64,64,16,2,2,32,32,0,0,0,1,-1,3,5;128,128,64,2,1,64,128,0,0,0,1,-1,3,8;64,128,64,1,1,64,128,0,0,0,1,-1,3,8;128,256,64,2,1,64,256,0,0,0,1,-1,3,8;128,128,64,2,1,64,128,0,0,0,1,-1,3,18;128,64,16,2,2,64,32,0,0,0,1,-1,3,7" \
  --out $O/tiles.md --json $O/tiles.json > $O/tiles.txt 2>&1
date +%s >> $O/t0; pack
timeout 95 python bench/compare.py --suite bench/zoo.txt --dtypes line --layout NCHW --shard 0/3 --json $O/zoo_nchw.json --out $O/zoo_nchw.md > $O/zoo_nchw.txt 2>&1
date +%s >> $O/t0; pack
timeout 75 python bench/compare.py --suite bench/zoo.txt --dtypes line --layout NHWC --shard 0/3 --json $O/zoo_nhwc.json --out $O/zoo_nhwc.md > $O/zoo_nhwc.txt 2>&1
date +%s >> $O/t0; pack
