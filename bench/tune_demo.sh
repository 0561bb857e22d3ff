#!/usr/bin/env bash
# Tuning demo, for a GPU machine (the lead's H200 run): tune the first four bench/suite.txt
# lines with a crash-hook config in the first sweep, write one CSV per line, fill a fresh
# perf-db, then a plain run of the first line that picks the perf-db winner.
#
#   bench/tune_demo.sh [OUT_DIR]          (default /tmp/dgrad_tune_demo)
#
# Knobs (environment): MAX_CONFIGS=16 configs per line, BUDGET=120 seconds per line,
# ITERS=20 timed launches per config, LINES=4 suite lines, BACKEND=auto (cuda on the H200;
# cpu runs the same demo on the CPU engine -- then use small MAX_CONFIGS and ITERS).
#
# What to look for: the first sweep prints one "Failed <config>: timing worker (pid N) killed
# by SIGABRT (exit status -6)" row and still completes; each sweep ends with "Perf-db: stored";
# the perf-db dump lists four records; the last run prints "Using perf-db config ...".
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

OUT="${1:-/tmp/dgrad_tune_demo}"
MAX_CONFIGS="${MAX_CONFIGS:-16}"
BUDGET="${BUDGET:-120}"
ITERS="${ITERS:-20}"
NLINES="${LINES:-4}"
BACKEND="${BACKEND:-auto}"
export PYTHONUNBUFFERED=1
DRIVER=(python3 -m driver)

mkdir -p "$OUT"
DB="$OUT/perfdb.sqlite"
rm -f "$DB" "$DB-wal" "$DB-shm" "$OUT"/tune_*.csv
mapfile -t SUITE < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' bench/suite.txt | grep -v '^$' | head -n "$NLINES")

# The crash hook: the second config the first line's sweep will time (--list launches nothing).
# shellcheck disable=SC2086
CRASH=$("${DRIVER[@]}" tune ${SUITE[0]} --backend "$BACKEND" --max-configs "$MAX_CONFIGS" --list | sed -n 2p)
echo "== crash hook for line 1: DGRAD_WORKER_CRASH_CONFIG=$CRASH"

for i in "${!SUITE[@]}"; do
    n=$((i + 1))
    hook=""
    [ "$i" -eq 0 ] && hook="$CRASH"
    echo
    echo "== tune line $n: ${SUITE[$i]}"
    # shellcheck disable=SC2086
    DGRAD_WORKER_CRASH_CONFIG="$hook" "${DRIVER[@]}" tune ${SUITE[$i]} -i "$ITERS" --backend "$BACKEND" \
        --max-configs "$MAX_CONFIGS" --time-budget "$BUDGET" --verify-top 3 --top 5 \
        --csv "$OUT/tune_$n.csv" --perfdb "$DB"
    echo "(tune exit status $?; CSV: $OUT/tune_$n.csv, $(($(wc -l < "$OUT/tune_$n.csv") - 1)) rows)"
done

echo
echo "== perf-db $DB"
python3 - "$DB" <<'PY'
import sys
from miopen_solver.perfdb import PerfDb
with PerfDb(sys.argv[1]) as db:
    for r in db.records():
        print(f"{r.problem_key} {r.arch} {r.solver}:{r.values} ({r.time_ms:.6f} ms)")
PY

echo
echo "== plain run of line 1 (uses the perf-db winner)"
# shellcheck disable=SC2086
"${DRIVER[@]}" ${SUITE[0]} -t 1 -V 1 -i "$ITERS" --backend "$BACKEND" --perfdb "$DB"
echo "(run exit status $?)"
