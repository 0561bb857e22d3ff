#!/usr/bin/env bash
# One device call that re-establishes everything bench/RESULTS.md records for the GPU, at the
# checked-out commit: correctness first, then speed. For the H200 (device tool), from the repo
# root:
#
#   DGRAD_COMMIT=$(git rev-parse --short HEAD) bench/h200_check.sh [OUT_DIR]     (default $OUT or /tmp/h200_check)
#
# Steps (each bounded by `timeout`, each writing OUT_DIR/<step>.txt; a failed step does not
# stop the later ones, the exit status is the number of failed steps -- a bad setting, below,
# exits 2 before any step):
#   1. tests/test_gpu.py (DGRAD_GPU_EXAMPLES random problems, default 40; GPU_TESTS_K selects
#      tests with pytest -k, GPU_TESTS_SECS bounds the step, default 420);
#   2. dgrad-driver replay fixtures/ --backend cuda;
#   3. bench/compare.py, fp16/bf16/fp32, markdown table + plot;
#   4. bench/first_launch.py (cold compile and warm first launch, fp16 defaults);
#   5. (only when STEPS names them) perf_models: dgrad-driver batch --backend cuda over MIOpen's
#      three perf-model files (NCHW and mixed lines, GPU reference); nchw: compare.py on the suite
#      in fp16 with every tensor NCHW and with every tensor NHWC (ours and cuDNN in each
#      layout); big: bench/big_tensors.py (split-N past 2^31/2^32 elements, GPU reference,
#      per-image time against half the batch); patch: bench/patch_h200.py (patch GEMM vs
#      cuDNN and cuBLAS); patch_forms: the same with the patch GEMM's persistent (schedule 9)
#      and TMA (10) forms on every patch line (refused rows say why);
#   6. (only when STEPS names it) tf32: TF32 math (-M 0, one device call, under 5 minutes):
#      tests/test_gpu_tf32.py (TF32 kernels against the unrounded float64 reference with MIOpen's
#      TF32 tolerance, against the CPU engine's TF32 result with the fp32 one, and shown to differ
#      from IEEE fp32; DGRAD_GPU_EXAMPLES random problems, default 40 here), then
#      bench/tf32_h200.py: our TF32 against cuDNN with torch.backends.cudnn.allow_tf32 = True and
#      our FFMA against cuDNN with TF32 off, on the suite's lines in fp32 and the zoo's fp32 lines,
#      both in CUDA graphs (tf32.md table, tf32.json rows);
#      tf32_wgmma: the warpgroup TF32 kernels (schedule 1 with -M 0): tests/test_gpu_tf32.py's
#      cases on them, then bench/tf32_h200.py --wgmma (the same rows, the warpgroup TF32 config
#      where it applies; against tf32's table it decides whether it becomes the TF32 default);
#      splitk: split-K through the fp32 workspace (one device call) -- the workspace-mode GPU
#      tests (tests/test_gpu.py -k split_k_workspace: verify against the float64 reference with
#      NaN-poisoned dX and slices, two runs bitwise equal, NCHW dX, split-N; DGRAD_GPU_EXAMPLES
#      random problems, default 40), then bench/splitk_h200.py (no split, atomic and workspace
#      split-K at 2 and 4 against cuDNN on the zoo's small-grid lines and the suite lines whose
#      defaults split; under 5 minutes): OUT_DIR/splitk.txt, splitk.md, splitk.json:
#        STEPS=splitk bench/h200_check.sh $OUT
#   7. (only when STEPS names it) zoo: bench/compare.py on bench/zoo.txt, each line in its own
#      data type, per-class report + plot + rows as JSON. ZOO_ARGS adds options, e.g.
#      ZOO_ARGS="--shard 1/2" in one call and "--shard 2/2" in the next (outputs are named
#      after the shard), then merge without a GPU:
#      python bench/compare.py --report zoo_1of2.json,zoo_2of2.json --out zoo.md --plot zoo.png
#      zoo_model: the same with the cost model's pick wherever the default runs a warpgroup
#      schedule (compare.py --model-defaults; against zoo in the same session it decides
#      whether miopen_solver.cost_model replaces heuristics.wgmma_config), named zoo_model*.
#      nchw_tma: the NCHW TMA schedule (13) -- tests/test_gpu.py -k nchw_tma (GPU tests
#      bounded at 200 s; 3x3 lines take the shifting producer), then bench/time_configs.py of
#      its tiles on the suite's lines in MIOpen's default layout (all NCHW; the 3x3 ones on the
#      staged shifting producer; nchw_tma.md, nchw_tma.json); run STEPS=nchw beside it for the
#      NCHW/NHWC table
#      transforms: the layout transforms (issue 16) -- tests/test_gpu.py's transpose tests
#      (both forms, the pair kernel) and NCHW problems, then bench/nchw_breakdown.py on the suite (each launch
#      of an NCHW run alone, both transpose forms of each transform, beside NHWC and PyTorch's
#      permute; nchw_breakdown.md)
#      tmask: split-K on the TMA schedule -- tests/test_gpu.py -k tma_split (work units, atomics
#      and the workspace, NHWC and NCHW, 96/128/256-column tiles), then bench/time_configs.py
#      of split shapes on the small-image layers (tmask.md, tmask.json; fit_cost_model --configs
#      takes the json)
#   8. (only when STEPS names it) zoo_tune: a tuning campaign over bench/zoo.txt, 40 configs per
#      layer (dgrad-driver tune --file, --max-configs 40, one worker, a compile pool; each line
#      with -J 1, so every config is timed as graph replays like compare.py's), its log in
#      OUT_DIR/zoo_tune.jsonl, then bench/default_vs_tuned.py's table (is every default within
#      10% of the best of its 40?). The campaign takes more than one device call: the step
#      stops it after ZOO_TUNE_SECS (default 480; the log keeps every config timed) and
#      ZOO_TUNE_LOG=path (a log of an earlier call, carried into the tree; .gz is unpacked)
#      resumes it.
#      short_k: one-warpgroup tile_k 32 tiles (6 configs, bench/time_configs.py) on the 29 zoo
#      layers whose GemmK is at most 512 (cpg > 32, kpg >= 16, fp16/bf16;
#      bench/results/2026-12-02_s13/short_k_lines.txt): the data to judge a short-K default
#      leave-one-layer-out (short_k.md, short_k.json)
#      subpixel: the sub-pixel schedules (15-17: a strided problem's phases as one stride-1
#      GEMM) -- tests/test_gpu.py -k subpixel (bounded at 200 s), then bench/time_configs.py of
#      SUBPIXEL_CONFIGS (five TMA tiles, two plain warpgroup tiles and the narrow tilde tile
#      128x32 the 32-channel strided layers took before) on the zoo's strided and
#      strided 1-D lines against their defaults and cuDNN (subpixel.md, subpixel.json);
#      subpixel_heldout: the same timing on bench/strided_heldout.txt (subpixel_heldout.md/.json)
#      stream_k: stream-K on the TMA schedule (split_k_reduce 3) -- tests/test_gpu.py -k stream_k
#      (bounded at 230 s), then bench/time_configs.py --configs default+stream on
#      bench/stream_k_lines.txt (each line's default beside its tile as stream-K; stream_k.md/.json);
#      STREAM_K_ARGS adds time_configs options, e.g. "--shard 1/2" in one call and "--shard 2/2"
#      in the next (the GPU tests run in both)
#      mma_direct: the direct schedule's mma body (banded-W MMAs, kernels/direct_mma.cu): its GPU
#      tests (tests/test_gpu.py -k mma_body), then bench/direct_h200.py on its 15 depthwise and
#      grouped layers, fp16 and bf16: the two lean policies against the 8 searched mma tiles,
#      cuDNN and the bandwidth floor (mma_direct/table.md, results.json)
#      mma_zoo: the zoo's 16-bit depthwise lines (class=depthwise) timed by bench/time_configs.py
#      at their default and the 8 mma tiles: NHWC on the DIRECT schedule (mma_zoo_nhwc.md), and
#      as MIOpen's default NCHW on DIRECT_NCHW (no transform) against the NCHW default, which
#      transposes around the NHWC kernel (mma_zoo_nchw.md); cuDNN in the same layout in each
#      (emulated kernels: tests/test_gemm_emu.py runs on the CPU, not here.)
# About 8-9 minutes on an H200, more than one device call may run: STEPS (a comma-separated
# subset of VALID_STEPS, set below this header; default DEFAULT_STEPS: gpu_tests,replay,compare,first_launch) splits it, e.g.
#   STEPS=gpu_tests,replay bench/h200_check.sh $OUT;  STEPS=compare,first_launch bench/h200_check.sh $OUT
#   STEPS=zoo bench/h200_check.sh $OUT      (the zoo alone: one device call)
#   STEPS=tf32 bench/h200_check.sh $OUT     (TF32 tests and timing: one device call)
# DGRAD_COMMIT names the commit in compare's header (the device copy of the tree has no git
# history). CHECK_SECS (default 540) bounds the whole script, under the device tool's 600 s per
# call: each step's bound is cut to what is left (a step with under 20 s left is skipped and
# counted as failed), zoo_tune stops 60 s before the end for its table; TAR_TO=path writes
# every output of OUT_DIR into one .tgz at the end (e.g. TAR_TO=$OUT/all.tgz; never packing
# itself; written whole, then renamed over the path; an existing file is replaced only when it
# is named .tgz or .tar.gz), so a call that ran long still brings back what it measured.
# Relative OUT_DIR, TAR_TO and ZOO_TUNE_LOG paths are the caller's (the script then works from
# the repository root). Every setting is checked before anything runs or is made: an unknown
# STEPS name, CHECK_SECS, GPU_TESTS_SECS, ZOO_TUNE_SECS or DGRAD_GPU_EXAMPLES that is not a whole
# number, a ZOO_TUNE_LOG that is not a readable file, an OUT_DIR or TAR_TO that cannot be
# written: one line on stderr naming it, exit 2, and no OUT_DIR or TAR_TO file made.
set -uo pipefail
VALID_STEPS=gpu_tests,replay,compare,first_launch,perf_models,nchw,nchw_tma,transforms,big,patch,patch_forms,tf32,tf32_wgmma,splitk,tmask,short_k,subpixel,subpixel_heldout,stream_k,mma_direct,mma_zoo,zoo,zoo_model,zoo_tune
DEFAULT_STEPS=gpu_tests,replay,compare,first_launch
die() { echo "h200_check: $*" >&2; exit 2; }
absolute() {  # a path as given, resolved against the caller's directory (the script cd's to the repo root)
    case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac
}
whole() {  # whole NAME DEFAULT WHAT: $NAME (DEFAULT when unset or empty) made a decimal number, or refused
    local v="${!1:-$2}"
    case "$v" in *[!0-9]*|??????????*) die "$1=$v: allowed: $3, e.g. $2" ;; esac
    printf -v "$1" '%d' "$(( 10#$v ))"   # 0540 is 540, not octal
}
[ "$#" -le 1 ] || die "$# arguments ($*): allowed: at most one, the OUT_DIR"
STEPS="${STEPS:-$DEFAULT_STEPS}"
IFS=, read -r -a asked <<< "$STEPS,"
for name in "${asked[@]}"; do
    case ",$VALID_STEPS," in *",$name,"*) [ -n "$name" ] && continue ;; esac
    die "STEPS=$STEPS: $([ -n "$name" ] && echo "unknown step '$name'" || echo "an empty name"); allowed: a comma-separated subset of $VALID_STEPS"
done
whole CHECK_SECS 540 "whole seconds"
whole GPU_TESTS_SECS 420 "whole seconds"
whole ZOO_TUNE_SECS 480 "whole seconds"
[ -z "${DGRAD_GPU_EXAMPLES:-}" ] || whole DGRAD_GPU_EXAMPLES 40 "a whole number of problems"
if [ -n "${ZOO_TUNE_LOG:-}" ]; then
    given="$ZOO_TUNE_LOG" ZOO_TUNE_LOG=$(absolute "$ZOO_TUNE_LOG")
    [ -f "$ZOO_TUNE_LOG" ] && [ -r "$ZOO_TUNE_LOG" ] || die "ZOO_TUNE_LOG=$given: not a readable file; allowed: the results log of an earlier zoo_tune call (.jsonl or .jsonl.gz)"
fi
OUTDIR=$(absolute "${1:-${OUT:-/tmp/h200_check}}")
there="$OUTDIR"   # the nearest existing directory on the way: mkdir -p makes the rest after the checks
while [ ! -e "$there" ] && [ ! -L "$there" ]; do there=$(dirname -- "$there"); done
[ -d "$there" ] && [ -w "$there" ] && [ -x "$there" ] || die "OUT_DIR $OUTDIR: cannot be created or written ($there is not a writable directory); allowed: a writable directory"
TAR_EXCLUDE=()   # checked before any step runs: a bad TAR_TO must not surface after minutes of device time
if [ -n "${TAR_TO:-}" ]; then
    given="$TAR_TO"
    TAR_TO=$(realpath -m -- "$TAR_TO")   # absolute (the caller's directory), symlinks followed: the link stays a link
    tar_dir=$(dirname -- "$TAR_TO") out_real=$(realpath -m -- "$OUTDIR")
    if [ -e "$TAR_TO" ]; then
        [ -f "$TAR_TO" ] && [ -w "$TAR_TO" ] || die "TAR_TO=$given: not a writable file; allowed: a .tgz path in a writable directory, e.g. TAR_TO=\$OUT/all.tgz"
        case "$TAR_TO" in *.tgz|*.tar.gz) ;; *) die "TAR_TO=$given: an existing file not named .tgz or .tar.gz (the archive would replace it); allowed: a new path or a .tgz/.tar.gz file, e.g. TAR_TO=\$OUT/all.tgz" ;; esac
    fi
    if [ "$tar_dir" != "$out_real" ] && ! { [ -d "$tar_dir" ] && [ -w "$tar_dir" ] && [ -x "$tar_dir" ]; }; then   # OUT_DIR is made below
        die "TAR_TO=$given: not a file in an existing, writable directory; allowed: a .tgz path, e.g. TAR_TO=\$OUT/all.tgz"
    fi
    TAR_TMP="$tar_dir/.$(basename -- "$TAR_TO").$$.tmp"   # the archive is written whole here, then renamed to TAR_TO
    case "$TAR_TO" in "$out_real"/*)   # an archive inside OUT_DIR (the example above) must not pack itself
        TAR_EXCLUDE=(--exclude="./${TAR_TO#"$out_real"/}" --exclude="./${TAR_TMP#"$out_real"/}") ;;
    esac
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.." || die "cannot enter the repository root"
mkdir -p -- "$OUTDIR" 2>/dev/null && [ -w "$OUTDIR" ] || die "OUT_DIR $OUTDIR: cannot be created or written; allowed: a writable directory"
export PYTHONPATH="${PYTHONPATH:-.}" MIOPEN_DGRAD_CACHE_DIR="${MIOPEN_DGRAD_CACHE_DIR:-/tmp/kcache}"
failed=0
left() {  # seconds of the CHECK_SECS budget left, less a reserve of $1 seconds
    local l=$(( CHECK_SECS - SECONDS - ${1:-0} )); echo $(( l > 0 ? l : 0 ))
}
step() {  # step NAME SECONDS COMMAND...   (SECONDS capped by what is left of CHECK_SECS)
    local name="$1" secs="$2"; shift 2
    case ",$STEPS," in *",$name,"*) ;; *) return 0 ;; esac
    local cap; cap=$(left 10)
    [ "$cap" -lt "$secs" ] && secs=$cap
    if [ "$secs" -lt 20 ]; then
        echo "!! $name skipped: CHECK_SECS=$CHECK_SECS spent (${SECONDS}s elapsed)"; failed=$((failed + 1)); return 0
    fi
    echo "== $name (at most ${secs}s): $*"
    if timeout "$secs" "$@" > "$OUTDIR/$name.txt" 2>&1; then
        tail -n 2 "$OUTDIR/$name.txt"
    else
        echo "!! $name failed (exit $?); see $OUTDIR/$name.txt"; tail -n 5 "$OUTDIR/$name.txt"
        failed=$((failed + 1))
    fi
}
DGRAD_GPU_EXAMPLES="${DGRAD_GPU_EXAMPLES:-40}" step gpu_tests "$GPU_TESTS_SECS" python -m pytest -q tests/test_gpu.py \
    ${GPU_TESTS_K:+-k "$GPU_TESTS_K"}
step replay 120 python -m driver replay fixtures/ --backend cuda
step compare 300 python bench/compare.py --dtypes fp16,bf16,fp32 --out "$OUTDIR/compare.md" \
    --plot "$OUTDIR/compare_h200.png"
grep -h "geometric" "$OUTDIR/compare.txt" 2>/dev/null
step first_launch 200 python bench/first_launch.py
step perf_models 540 bash -c 'rc=0; for f in tests/data/perf_models/*.txt; do
    python -m driver batch "$f" --backend cuda --quiet --csv "$0/perf_models_$(basename "$f" .txt).csv" || rc=1
done; exit $rc' "$OUTDIR"
step nchw 540 bash -c 'rc=0; for lay in NCHW NHWC; do
    python bench/compare.py --dtypes fp16 --layout $lay --out "$0/suite_$lay.md" --json "$0/suite_$lay.json" || rc=1
done; exit $rc' "$OUTDIR"
DGRAD_GPU_EXAMPLES="${DGRAD_GPU_EXAMPLES:-15}" step nchw_tma 570 bash -c 'rc=0
timeout 200 python -m pytest -q tests/test_gpu.py -k nchw_tma || rc=1
sed -E "s/ --(in|out|fil)_layout NHWC//g" bench/suite.txt > "$0/suite_nchw.txt"
python bench/time_configs.py --suite "$0/suite_nchw.txt" --only "r50_3x3_c64,big_3x3,dil2,r50_1x1_c64,big_1x1" \
    --configs "64,256,64,1,1,64,256,0,0,0,1,-1,2,13;64,128,64,1,1,64,128,0,0,0,1,-1,4,13;64,64,64,1,1,64,64,0,0,0,1,-1,4,13;128,256,64,2,1,64,256,0,0,0,1,-1,4,13" \
    --out "$0/nchw_tma.md" --json "$0/nchw_tma.json" || rc=1
exit $rc' "$OUTDIR"
step transforms 300 bash -c 'rc=0
timeout 150 python -m pytest -q tests/test_gpu.py -k "transpose_kernel_is_bit_exact or transpose_pair_kernel or nchw_and_mixed or nchw_dx or group_pack_default_in_nchw" || rc=1
python bench/nchw_breakdown.py --out "$0/nchw_breakdown.md" || rc=1
exit $rc' "$OUTDIR"
step big 540 python bench/big_tensors.py --json "$OUTDIR/big_tensors.json"
step patch 300 python bench/patch_h200.py --json "$OUTDIR/patch_h200.json"
step patch_forms 540 bash -c 'rc=0; for cfg in 128,256,64,2,1,64,256,0,0,0,1,-1,3,9 128,256,64,2,1,64,256,0,0,0,1,-1,4,10 \
        128,128,64,1,1,128,128,0,0,0,1,-1,4,10; do
    python bench/patch_h200.py --config $cfg --json "$0/patch_h200_${cfg##*,}_${cfg%%,*}x$(echo $cfg | cut -d, -f2).json" || rc=1
done; exit $rc' "$OUTDIR"
DGRAD_GPU_EXAMPLES="${DGRAD_GPU_EXAMPLES:-40}" step tf32 290 bash -c 'rc=0
python -m pytest -q tests/test_gpu_tf32.py || rc=1
python bench/tf32_h200.py --out "$0/tf32.md" --json "$0/tf32.json" || rc=1
exit $rc' "$OUTDIR"
grep -h "geometric" "$OUTDIR/tf32.txt" 2>/dev/null
DGRAD_GPU_EXAMPLES="${DGRAD_GPU_EXAMPLES:-40}" step tf32_wgmma 290 bash -c 'rc=0
python -m pytest -q tests/test_gpu_tf32.py -k wgmma || rc=1
python bench/tf32_h200.py --wgmma --out "$0/tf32_wgmma.md" --json "$0/tf32_wgmma.json" || rc=1
exit $rc' "$OUTDIR"
DGRAD_GPU_EXAMPLES="${DGRAD_GPU_EXAMPLES:-40}" step splitk 570 bash -c 'rc=0
python -m pytest -q tests/test_gpu.py -k split_k_workspace || rc=1
python bench/splitk_h200.py --max-seconds 200 --json "$0/splitk.json" --out "$0/splitk.md" || rc=1
exit $rc' "$OUTDIR"
DGRAD_GPU_EXAMPLES="${DGRAD_GPU_EXAMPLES:-40}" step tmask 570 bash -c 'rc=0
python -m pytest -q tests/test_gpu.py -k tma_split || rc=1
python bench/time_configs.py --only "layer4.1.conv3,features.18,layer3.1.conv3,c1280_k1280_8,c2560_k1280" \
    --configs "128,96,64,2,1,64,96,0,0,0,2,-1,7,3;128,96,64,2,1,64,96,0,0,0,2,-1,4,3;128,192,64,2,1,64,192,0,0,0,2,-1,5,3;128,128,64,2,1,64,128,0,0,0,2,-1,6,3;128,128,64,2,1,64,128,0,0,0,3,-1,4,3,2" \
    --out "$0/tmask.md" --json "$0/tmask.json" || rc=1
exit $rc' "$OUTDIR"
step short_k 540 python bench/time_configs.py --suite bench/results/2026-12-02_s13/short_k_lines.txt --only _ \
    --configs "128,64,32,1,1,128,64,0,0,0,1,-1,3,1;128,128,32,1,1,128,128,0,0,0,1,-1,3,1;128,128,32,1,1,128,128,0,0,0,1,-1,3,2;64,64,32,1,1,64,64,0,0,0,1,-1,3,1;64,128,32,1,1,64,128,0,0,0,1,-1,3,1;64,256,32,1,1,64,256,0,0,0,1,-1,3,1" \
    --out "$OUTDIR/short_k.md" --json "$OUTDIR/short_k.json"
SUBPIXEL_CONFIGS="128,128,64,2,1,64,128,0,0,0,1,-1,4,17;256,128,64,2,1,128,128,0,0,0,1,-1,4,16;128,32,64,2,1,64,32,0,0,0,1,-1,4,1;256,128,64,2,1,128,128,0,0,0,1,-1,4,17;128,256,64,2,1,64,256,0,0,0,1,-1,4,17;128,64,64,2,1,64,64,0,0,0,1,-1,4,17;128,128,64,1,1,128,128,0,0,0,1,-1,4,17;128,128,64,2,1,64,128,0,0,0,1,-1,4,16"
DGRAD_GPU_EXAMPLES="${DGRAD_GPU_EXAMPLES:-30}" step subpixel 570 bash -c 'rc=0
    timeout 200 python -m pytest -q tests/test_gpu.py -k subpixel || rc=1
    grep -E "class=strided|k3s2" bench/zoo.txt > "$0/strided_zoo.txt"
    python bench/time_configs.py --suite "$0/strided_zoo.txt" --only _ --configs "$1" \
        --out "$0/subpixel.md" --json "$0/subpixel.json" || rc=1
    exit $rc' "$OUTDIR" "$SUBPIXEL_CONFIGS"
DGRAD_GPU_EXAMPLES="${DGRAD_GPU_EXAMPLES:-30}" step stream_k 590 bash -c 'rc=0
    timeout 230 python -m pytest -q tests/test_gpu.py -k stream_k || rc=1
    python bench/time_configs.py --suite bench/stream_k_lines.txt --only _ --configs default+stream \
        $STREAM_K_ARGS --out "$0/stream_k.md" --json "$0/stream_k.json" || rc=1
    exit $rc' "$OUTDIR"
step subpixel_heldout 570 python bench/time_configs.py --suite bench/strided_heldout.txt --only _ \
    --configs "$SUBPIXEL_CONFIGS" --out "$OUTDIR/subpixel_heldout.md" --json "$OUTDIR/subpixel_heldout.json"
step mma_direct 540 bash -c 'rc=0
    DGRAD_GPU_EXAMPLES=24 python -m pytest -q tests/test_gpu.py -k mma_body || rc=1
    python bench/direct_h200.py --dtypes fp16,bf16 --policies v8_p8x1_t128_l1_s1_lean,v8_p8x2_t128_l1_s1_lean \
        --configs "$(python -c "from miopen_solver.direct import MMA_TILES, mma_config; print(chr(59).join(mma_config(*t).serialize() for t in MMA_TILES))")" \
        --out "$0/mma_direct" || rc=1
    exit $rc' "$OUTDIR"
step mma_zoo 570 bash -c 'rc=0
    grep "class=depthwise" bench/zoo.txt | grep -v "^conv " > "$0/dw_nhwc.txt"
    sed -E "s/ --(in|out|fil)_layout NHWC//g" "$0/dw_nhwc.txt" > "$0/dw_nchw.txt"
    for sched in 4 14; do
        lay=$([ $sched = 4 ] && echo nhwc || echo nchw)
        cfgs=$(python -c "import sys; from miopen_solver.direct import MMA_TILES, mma_config; print(chr(59).join(mma_config(*t).serialize().rsplit(chr(44), 1)[0] + chr(44) + sys.argv[1] for t in MMA_TILES))" $sched)
        timeout 270 python bench/time_configs.py --suite "$0/dw_$lay.txt" --only _ --configs "$cfgs" \
            --out "$0/mma_zoo_$lay.md" --json "$0/mma_zoo_$lay.json" || rc=1
    done
    exit $rc' "$OUTDIR"
ZOO_TAG=zoo$(echo "${ZOO_ARGS:-}" | sed -n 's/.*--shard \([0-9]*\)\/\([0-9]*\).*/_\1of\2/p')
step zoo 570 python bench/compare.py --suite bench/zoo.txt --dtypes line --out "$OUTDIR/$ZOO_TAG.md" \
    --plot "$OUTDIR/${ZOO_TAG}_h200.png" --json "$OUTDIR/$ZOO_TAG.json" ${ZOO_ARGS:-}
step zoo_model 570 python bench/compare.py --suite bench/zoo.txt --dtypes line --model-defaults \
    --out "$OUTDIR/${ZOO_TAG/zoo/zoo_model}.md" --json "$OUTDIR/${ZOO_TAG/zoo/zoo_model}.json" ${ZOO_ARGS:-}
case ",$STEPS," in *",zoo_tune,"*)   # a failed unpack, tune (other than stopped by its time bound) or table counts
    secs=$(left 60); [ "$ZOO_TUNE_SECS" -lt "$secs" ] && secs=$ZOO_TUNE_SECS
    log="$OUTDIR/zoo_tune.jsonl"
    if [ "$secs" -lt 20 ]; then
        echo "!! zoo_tune skipped: CHECK_SECS=$CHECK_SECS spent (${SECONDS}s elapsed)"; failed=$((failed + 1))
    elif [ -n "${ZOO_TUNE_LOG:-}" ] && ! case "$ZOO_TUNE_LOG" in
            *.gz) gunzip -c -- "$ZOO_TUNE_LOG" > "$log" ;;
            *) cp -- "$ZOO_TUNE_LOG" "$log" ;;
        esac; then
        rm -f -- "$log"; echo "!! zoo_tune: ZOO_TUNE_LOG=$ZOO_TUNE_LOG could not be unpacked or copied"; failed=$((failed + 1))
    else
        RESUME=""; [ -s "$log" ] && RESUME="--resume"
        echo "== zoo_tune (at most ${secs}s) $RESUME"
        # every zoo line with -J 1: its configs timed as graph replays, as compare.py times the zoo
        sed 's/ -F 2 / -F 2 -J 1 /' bench/zoo.txt > "$OUTDIR/zoo_graph.txt"
        timeout -s INT -k 30 "$secs" python -m driver tune --file "$OUTDIR/zoo_graph.txt" --max-configs 40 --gpus all \
            --compile-pool "$(( $(nproc) < 12 ? $(nproc) : 12 ))" --verify-top 1 --quiet --results "$log" $RESUME \
            > "$OUTDIR/zoo_tune.txt" 2>&1
        rc=$?
        echo "zoo_tune: exit $rc (124, 130: stopped by the time bound; resume with ZOO_TUNE_LOG)"; tail -n 3 "$OUTDIR/zoo_tune.txt"
        case "$rc" in 0|124|130) ;; *) echo "!! zoo_tune failed (exit $rc); see $OUTDIR/zoo_tune.txt"; failed=$((failed + 1)) ;; esac
        if python bench/default_vs_tuned.py "$log" --suite bench/zoo.txt \
            --out "$OUTDIR/default_vs_tuned.md" --json "$OUTDIR/default_vs_tuned.json"; then
            head -n 16 "$OUTDIR/default_vs_tuned.md"
        else
            echo "!! zoo_tune: bench/default_vs_tuned.py failed (its error above)"; failed=$((failed + 1))
        fi
    fi
    ;;
esac
if [ -n "${TAR_TO:-}" ]; then
    if tar czf - ${TAR_EXCLUDE[@]+"${TAR_EXCLUDE[@]}"} -C "$OUTDIR" . > "$TAR_TMP" && mv -f -- "$TAR_TMP" "$TAR_TO"; then
        echo "outputs: $TAR_TO"
    else
        rm -f -- "$TAR_TMP"; echo "!! TAR_TO=$TAR_TO: tar failed"; failed=$((failed + 1))
    fi
fi
exit "$failed"
