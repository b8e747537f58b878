#!/usr/bin/env bash
# One GPU session for the performance work (bench/NOTES_gpu.md), on one H200, in ~3 minutes:
# diagnostics (bench/gpu_probe.py), the two benchmarks, the cuda-marked tests and one epoch.
# With OLD=<dir holding an older tinytrain/ and bench/>, the step benchmark and the timing
# diagnostics also run on that code, in the same session, for an A/B comparison.
#
#   OUT=/path/for/logs [OLD=dir] bash tools/gpu_perf_session.sh [parts...]
#
# Parts (default: all, in this order): probe conv mnist old tests epoch torch-epoch. Each part is
# time-boxed and logged to $OUT/<part>.log; a summary is printed last ($OUT/summary.txt).
# (The GPU machine has no nbformat: the modules that import it fail to collect, and the
# cuda-marked tests run regardless.)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tinytrain-perf}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 MPLBACKEND=Agg
export TINYTRAIN_DATA=${TINYTRAIN_DATA:-.dev/data}
PY=${PY:-python3}
T0=$(date +%s)
RESULTS=()
PARTS=("$@")
[ ${#PARTS[@]} -eq 0 ] && PARTS=(probe conv mnist old tests epoch torch-epoch)

part() {  # part NAME SECONDS COMMAND...
    local name=$1 limit=$2 start rc
    shift 2
    start=$(date +%s)
    echo "=== $name (limit ${limit}s): $*"
    timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    [ "$rc" = 124 ] && echo "TIMEOUT after ${limit}s" >>"$OUT/$name.log"
    RESULTS+=("$(printf '%-8s rc=%-3s %4ss' "$name" "$rc" "$(($(date +%s) - start))")")
}

for p in "${PARTS[@]}"; do
    case $p in
        probe) part probe 90 "$PY" bench/gpu_probe.py ;;
        conv) part conv 45 "$PY" bench/conv_gpu.py ;;
        mnist) part mnist 60 "$PY" bench/mnist_gpu.py --steps 150 ;;
        old) [ -n "${OLD:-}" ] && part old 60 bash -c "cd '$OLD' && PYTHONPATH=. $PY \
            bench/mnist_gpu.py --no-count --steps 150 && PYTHONPATH=. TINYTRAIN_ROOT=. $PY \
            '$PWD/bench/gpu_probe.py' timing" ;;
        tests) part tests 150 "$PY" -m pytest -m cuda --maxfail=20 -q -p no:cacheprovider \
            --timeout=90 --continue-on-collection-errors tests ;;  # 3 collection errors count
        epoch) part epoch 60 "$PY" -m tinytrain.train --device cuda --no-download ;;
        torch-epoch) part torch-epoch 40 "$PY" bench/mnist_gpu.py --epoch-only ;;
    esac
done

{
    echo
    echo "===== summary ($(($(date +%s) - T0)) s in all; logs in $OUT)"
    printf '%s\n' "${RESULTS[@]}"
    echo "--- probe"; sed -n '/^===== summary/,$p' "$OUT/probe.log" 2>/dev/null | tail -n +2
    echo "--- conv"; grep -E "^\|" "$OUT/conv.log" 2>/dev/null
    echo "--- mnist"; grep -E "^(GPU|\|)" "$OUT/mnist.log" 2>/dev/null
    echo "--- old"; grep -E "^(\||timing)" "$OUT/old.log" 2>/dev/null
    echo "--- tests"; grep -E "passed|failed|error" "$OUT/tests.log" 2>/dev/null | tail -n 3
    grep -E "^(FAILED|ERROR) " "$OUT/tests.log" 2>/dev/null | head -n 10
    echo "--- epoch"; grep -E "^(epoch|test:)" "$OUT/epoch.log" 2>/dev/null
    grep -E "^PyTorch eager" "$OUT/torch-epoch.log" 2>/dev/null
} | tee "$OUT/summary.txt"
