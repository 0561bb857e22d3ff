#!/usr/bin/env bash
# Configs per second of a tuning campaign over bench/suite.txt on every GPU (--gpus all), without
# and with the compile pool. One device call on the H200 (about 3-6 minutes), from the repo root:
#
#   bench/campaign_rate.sh [OUT_DIR]        (default $OUT or /tmp/campaign_rate)
#
# Both runs time the same sampled configs (MAX_CONFIGS per problem, default 16; --verify-top 1),
# each from its own empty kernel cache, so neither finds the other's binaries; POOL (default 8,
# or the CPU count where that is smaller: --compile-pool takes at most it) is the compile pool's size in the second run. Each run writes OUT_DIR/pool<N>.{txt,err,jsonl,csv};
# the lines printed are the engine, the compile pool's counts and `Timed N configs in S s (R
# configs/s)`. BACKEND=cpu runs the same on a CPU (the pool is then off: nothing to compile).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUTDIR="${1:-${OUT:-/tmp/campaign_rate}}"
mkdir -p "$OUTDIR"
export PYTHONPATH="${PYTHONPATH:-.}"
FILE="${FILE:-bench/suite.txt}" MAX_CONFIGS="${MAX_CONFIGS:-16}" POOL="${POOL:-$(( $(nproc) < 8 ? $(nproc) : 8 ))}"
BACKEND="${BACKEND:-cuda}" LIMIT="${LIMIT:-240}" GPUS="${GPUS:-all}"
status=0
for pool in 0 "$POOL"; do
    cache="$(mktemp -d /tmp/kcache_rate_XXXX)"
    MIOPEN_DGRAD_CACHE_DIR="$cache" timeout "$LIMIT" python3 -m driver tune --file "$FILE" --gpus "$GPUS" \
        --backend "$BACKEND" --max-configs "$MAX_CONFIGS" --verify-top 1 --compile-pool "$pool" --no-perfdb \
        --results "$OUTDIR/pool$pool.jsonl" --csv "$OUTDIR/pool$pool.csv" \
        > "$OUTDIR/pool$pool.txt" 2> "$OUTDIR/pool$pool.err"
    rc=$?
    echo "== --compile-pool $pool: exit $rc"
    grep -E '^(Engine|Compile pool|Timed|Total)' "$OUTDIR/pool$pool.txt"
    [ "$rc" -eq 0 ] || { status=1; tail -n 3 "$OUTDIR/pool$pool.err"; }
    rm -rf "$cache"
done
exit "$status"
