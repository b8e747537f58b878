#!/usr/bin/env bash
# One GPU session for tinytrain's data-parallel training (issue 10), on 2 H200s, ~6 minutes.
#
#   OUT=/path/for/logs bash tools/gpu_ddp_session.sh
#   BENCH=0 OUT=... bash tools/gpu_ddp_session.sh     # without the two benchmark parts
#
# Run from anywhere (it moves to the repository root). Needs python3 with cupy (and NCCL,
# e.g. nvidia-nccl-cu13), mpi4py and torch; full MNIST in .dev/data/mnist (or TINYTRAIN_DATA
# pointing at a root that holds mnist/). MPI: the mpich wheel in .whl/ when it is there
# (installed with --prefix: --target would drop its lib/libmpi.so.12), else the mpiexec on
# PATH. Every part is time-boxed and independent: a failure or a timeout is recorded and the
# next part runs. Each part's output is in $OUT/<part>.log; a summary is printed last and
# written to $OUT/summary.txt.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tinytrain-ddp-session}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 MPLBACKEND=Agg
export TINYTRAIN_DATA=${TINYTRAIN_DATA:-.dev/data}
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}              # NVLink multicast stays off
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # if mpiexec is Open MPI
PY=${PY:-python3}
T0=$(date +%s)
RESULTS=()

# ---- MPI: PyPI's mpich wheel installs bin/mpiexec (Hydra) and lib/libmpi.so.12 as data
# files; mpi4py 4 finds libmpi through MPI4PY_LIBMPI.
if ls .whl/mpich-*.whl >/dev/null 2>&1; then
    MPI_PREFIX=/tmp/tinytrain-mpi
    if ! "$PY" -m pip install -q --no-index --no-deps --ignore-installed \
            --prefix "$MPI_PREFIX" .whl/*.whl >"$OUT/mpi-install.log" 2>&1; then
        echo "pip failed; unpacking the mpich wheel by hand" >>"$OUT/mpi-install.log"
        "$PY" - "$MPI_PREFIX" .whl/mpich-*.whl >>"$OUT/mpi-install.log" 2>&1 <<'EOF'
import os, stat, sys, zipfile
prefix, wheel = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if ".data/data/" in name and not name.endswith("/"):
            dest = os.path.join(prefix, name.split(".data/data/", 1)[1])
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(z.read(name))
            if "/bin/" in "/" + name.split(".data/data/", 1)[1]:
                os.chmod(dest, os.stat(dest).st_mode | stat.S_IEXEC)
EOF
    fi
    export PATH=$MPI_PREFIX/bin:$PATH
    [ -e "$MPI_PREFIX/lib/libmpi.so.12" ] && export MPI4PY_LIBMPI=$MPI_PREFIX/lib/libmpi.so.12
    for site in "$MPI_PREFIX"/lib/python3*/site-packages; do  # an mpi4py wheel, if carried
        [ -d "$site" ] && export PYTHONPATH=$PYTHONPATH:$site
    done
fi
export TINYTRAIN_MPIEXEC=${TINYTRAIN_MPIEXEC:-$(command -v mpiexec)}
MPIEXEC=$TINYTRAIN_MPIEXEC

# ---- NCCL: CuPy loads it from the nvidia-nccl wheel of its CUDA version; else try any
# nvidia-nccl wheel's library (e.g. the one PyTorch brought).
if ! "$PY" -c "import sys, cupy.cuda.nccl as n; sys.exit(0 if n.available else 1)" 2>/dev/null
then
    NCCL_LIB=$("$PY" -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
    [ -n "$NCCL_LIB" ] && export LD_LIBRARY_PATH=$NCCL_LIB:${LD_LIBRARY_PATH:-}
fi

part() {  # part NAME SECONDS COMMAND...: run it time-boxed, log to $OUT/NAME.log
    local name=$1 limit=$2 start rc
    shift 2
    start=$(date +%s)
    echo "=== $name (limit ${limit}s): $*"
    timeout --kill-after=10 "$limit" bash -c '"$@"' _ "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    [ "$rc" = 124 ] && echo "TIMEOUT after ${limit}s" >>"$OUT/$name.log"
    RESULTS+=("$(printf '%-16s rc=%-3s %4ss' "$name" "$rc" "$(($(date +%s) - start))")")
    tail -n 3 "$OUT/$name.log"
}

preflight() {
    nvidia-smi -L
    "$PY" -c "import sys, cupy, cupy.cuda.nccl as n, mpi4py; print(sys.version.split()[0], \
'cupy', cupy.__version__, 'nccl', n.get_version() if n.available else 'NOT AVAILABLE', \
'mpi4py', mpi4py.__version__, 'gpus', cupy.cuda.runtime.getDeviceCount())"
    echo "mpiexec: $MPIEXEC"
    "$MPIEXEC" -n 2 "$PY" -c "from mpi4py import MPI; c = MPI.COMM_WORLD; \
print('rank', c.rank, 'of', c.size, MPI.Get_library_version().split(chr(10))[0])"
}

exact() {  # 2 GPUs x batch 32 == 1 GPU x batch 64, 10 SGD steps in float64
    local demo=(-m tinytrain.distributed.demo --device cuda --steps 10)
    "$MPIEXEC" -n 2 "$PY" "${demo[@]}" --batch-size 32 --save "$OUT/exact-two.npz" || return 1
    "$PY" "${demo[@]}" --batch-size 64 --save "$OUT/exact-one.npz" || return 1
    "$PY" -c "import sys, numpy as np, tinytrain as tt
a, b = tt.load('$OUT/exact-two.npz'), tt.load('$OUT/exact-one.npz')
d = max(float(np.abs(a[k].numpy() - b[k].numpy()).max()) for k in a)
print(f'max |2 GPUs x 32 - 1 GPU x 64| = {d:.2e} (must be <= 1e-9)'); sys.exit(d > 1e-9)"
}

worker() { "$MPIEXEC" -n 2 "$PY" tests/mpi_worker.py "$1" --backend nccl; }

export PY MPIEXEC OUT
export -f preflight exact worker  # part() runs them in a time-boxed bash

part preflight 60 preflight
part nccl-collectives 90 worker collectives
part nccl-ddp-buckets 60 worker ddp_buckets
part nccl-ddp-features 60 worker ddp_features
part nccl-ddp-buffers 60 worker ddp_buffers
part nccl-exact 90 exact
part train-1gpu 120 "$PY" -m tinytrain.train --device cuda --no-download
part train-2gpu 120 "$PY" -m tinytrain.train --device cuda --no-download --nproc 2 \
    --save "$OUT/ddp-2gpu.npz"
part chapter7 120 "$PY" notebooks/07_ddp.py
if [ "${BENCH:-1}" != 0 ]; then  # BENCH=0: correctness only (~3 minutes)
    part bench 180 "$PY" bench/ddp.py --backend nccl --nproc 2 --json "$OUT/bench.json"
    part bench-buckets 90 "$PY" bench/ddp.py --backend nccl --nproc 2 --no-torch \
        --model pytorch-example
fi

{
    echo
    echo "===== summary ($(($(date +%s) - T0)) s in all; logs in $OUT)"
    printf '%s\n' "${RESULTS[@]}"
    echo "--- preflight"; grep -E "cupy|mpiexec|rank" "$OUT/preflight.log"
    for w in collectives ddp-buckets ddp-features ddp-buffers; do
        echo "--- nccl $w"; grep -E "^ok |Error|error" "$OUT/nccl-$w.log" | head -n 4
    done
    echo "--- exactness"; grep -E "max \||parameters" "$OUT/nccl-exact.log"
    echo "--- one epoch, default recipe, 1 GPU"; grep -E "^(model|epoch|test:)" "$OUT/train-1gpu.log"
    echo "--- one epoch, default recipe, 2 GPUs (NCCL)"
    grep -E "^(model|epoch|test:|parameters)" "$OUT/train-2gpu.log"
    echo "--- chapter 7"; tail -n 2 "$OUT/chapter7.log"
    echo "--- bench/ddp.py (convnet, batch 64 per GPU)"; grep -vE "^\s*$" "$OUT/bench.log" | tail -n 8
    echo "--- bench/ddp.py (pytorch-example, 2 buckets)"; tail -n 4 "$OUT/bench-buckets.log"
} | tee "$OUT/summary.txt"
