#!/usr/bin/env bash
# One GPU session for tinytrain's CUDA backend (issue 9), on one H200, in about 8 minutes.
#
#   OUT=/path/for/logs bash tools/gpu_session.sh
#
# Run from anywhere (it moves to the repository root). Needs python3 with cupy-cuda13x,
# torch, pytest (+ pytest-timeout), hypothesis and matplotlib; full MNIST in .dev/data/mnist
# (or TINYTRAIN_DATA pointing at a root that holds mnist/). Every part is time-boxed and
# independent: a failure or a timeout is recorded and the next part runs. Each part's output
# is in $OUT/<part>.log; a summary (exit codes, times, the key lines) is printed last and
# written to $OUT/summary.txt.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tinytrain-gpu-session}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 MPLBACKEND=Agg
export TINYTRAIN_DATA=${TINYTRAIN_DATA:-.dev/data}
export TINYTRAIN_FIGURES=$OUT/figures  # the chapter saves its figures there
PY=${PY:-python3}
T0=$(date +%s)
RESULTS=()

part() {  # part NAME SECONDS COMMAND...: run it time-boxed, log to $OUT/NAME.log
    local name=$1 limit=$2 start rc
    shift 2
    start=$(date +%s)
    echo "=== $name (limit ${limit}s): $*"
    timeout --kill-after=15 "$limit" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    [ "$rc" = 124 ] && echo "TIMEOUT after ${limit}s" >>"$OUT/$name.log"
    RESULTS+=("$(printf '%-12s rc=%-3s %4ss' "$name" "$rc" "$(($(date +%s) - start))")")
    tail -n 3 "$OUT/$name.log"
}

part gpu 20 nvidia-smi -L
part cuda-tests 200 "$PY" -m pytest -m cuda --maxfail=20 -q -p no:cacheprovider --timeout=90 tests
part chapter4 60 "$PY" notebooks/04_cuda_im2col.py
part conv-bench 60 "$PY" bench/conv_gpu.py
part mnist-bench 120 "$PY" bench/mnist_gpu.py
part train-epoch 60 "$PY" -m tinytrain.train --device cuda --no-download
part torch-epoch 45 "$PY" bench/mnist_gpu.py --epoch-only

{
    echo
    echo "===== summary ($(($(date +%s) - T0)) s in all; logs in $OUT)"
    printf '%s\n' "${RESULTS[@]}"
    echo "--- cuda tests";  grep -E "passed|failed|error|skipped" "$OUT/cuda-tests.log" | tail -n 3
    grep -E "^(FAILED|ERROR) " "$OUT/cuda-tests.log" | head -n 10
    echo "--- chapter 4";   tail -n 2 "$OUT/chapter4.log"
    echo "--- conv vs cuDNN"; grep -E "^\|" "$OUT/conv-bench.log"
    echo "--- MNIST steps"; grep -E "^(GPU|\|)" "$OUT/mnist-bench.log"
    echo "--- one epoch, default recipe"
    grep -E "^(model|epoch|test:)" "$OUT/train-epoch.log"
    grep -E "^PyTorch eager" "$OUT/torch-epoch.log"
} | tee "$OUT/summary.txt"
