"""``python -m tinytrain.doctor``: what this machine can run, and what to install.

Learners lose hours on set-up. This prints, in one screen: Python, NumPy and
the BLAS it calls, CuPy with the CUDA driver and GPUs, MPI, the test-time
reference (PyTorch) and Jupyter, each with the command that fixes what is
missing. It never fails: every probe is guarded.
"""

from __future__ import annotations

import importlib
import os
import platform
import shutil
import sys
from collections.abc import Callable

OK, MISSING = "ok", "--"


def _probe(fn: Callable[[], str]) -> tuple[str, str]:
    try:
        return OK, fn()
    except Exception as exc:  # a doctor reports, it does not crash
        return MISSING, f"{type(exc).__name__}: {exc}".splitlines()[0][:120]


def _python() -> str:
    v = sys.version_info
    if v < (3, 10):
        raise RuntimeError(f"Python {platform.python_version()} is too old; tinytrain needs 3.10+")
    return f"{platform.python_version()} ({sys.executable})"


def _numpy() -> str:
    import numpy as np

    blas = "unknown BLAS"
    try:
        info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = f"{info.get('name')} {info.get('version', '')}".strip()
    except Exception:
        pass
    threads = ""
    try:
        from threadpoolctl import threadpool_info

        pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
        if pools:
            threads = f", {pools[0]['num_threads']} threads, kernel {pools[0].get('architecture')}"
    except Exception:
        pass
    return f"{np.__version__} with {blas}{threads}"


def _cupy() -> str:
    import cupy

    rt = cupy.cuda.runtime
    n = rt.getDeviceCount()
    drv = rt.driverGetVersion()
    gpus = []
    for i in range(n):
        props = rt.getDeviceProperties(i)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        gpus.append(f"{i}: {name} ({props['totalGlobalMem'] / 2**30:.0f} GiB)")
    return (f"CuPy {cupy.__version__}, CUDA driver {drv // 1000}.{drv % 1000 // 10}, "
            f"{n} GPU(s): " + "; ".join(gpus))


def _nvrtc() -> str:
    import cupy

    major, minor = cupy.cuda.nvrtc.getVersion()
    return f"NVRTC {major}.{minor} (compiles the CUDA kernels, also without a GPU)"


def _cuda_kernels() -> str:
    """tinytrain's .cu sources: compiled to PTX (no GPU needed), and loaded if there is a GPU."""
    from tinytrain.backend import cuda_is_available
    from tinytrain.kernels.cuda import nvrtc, runtime

    ptx = nvrtc.compile_sources()
    major, minor = nvrtc.version()
    files = len({name.split()[0] for name in ptx})
    line = f"{files} .cu files compile to PTX for float32 and float64 (NVRTC {major}.{minor})"
    if cuda_is_available():
        line += f"; {len(runtime.compile_all())} kernels load on the GPU"
    return line


def _mpi() -> str:
    from mpi4py import MPI

    launcher = shutil.which("mpiexec") or shutil.which("mpirun")
    lib = MPI.Get_library_version().splitlines()[0].strip()
    return f"mpi4py with {lib}; launcher: {launcher or 'not on PATH'}"


def _module_version(name: str) -> Callable[[], str]:
    def probe() -> str:
        mod = importlib.import_module(name)
        return str(getattr(mod, "__version__", "installed"))

    return probe


def _data() -> str:
    root = os.environ.get("TINYTRAIN_DATA")
    return f"TINYTRAIN_DATA={root}" if root else "TINYTRAIN_DATA not set (per-user cache is used)"


CHECKS: list[tuple[str, Callable[[], str], str]] = [
    ("python", _python, "install Python 3.10 or newer"),
    ("numpy", _numpy, "pip install -e ."),
    ("cuda (cupy)", _cupy, "optional, for device='cuda': pip install -e '.[cuda12]' or "
                           "'.[cuda13]' (matching your driver; needs an NVIDIA GPU)"),
    ("nvrtc", _nvrtc, "comes with CuPy"),
    ("cuda kernels", _cuda_kernels, "NVRTC compiles them without a GPU: "
                                    "pip install nvidia-cuda-nvrtc-cu12"),
    ("mpi", _mpi, "optional, for multi-process DDP: pip install -e '.[mpi]'"),
    ("torch (tests)", _module_version("torch"), "tests only: pip install -e '.[dev]'"),
    ("jupyterlab", _module_version("jupyterlab"), "pip install -e '.[dev]' (or: make lab)"),
    ("data", _data, ""),
]


REQUIRED = ("python", "numpy")


def report() -> list[tuple[str, str, str, str]]:
    """One row per check: (name, status, detail, how to fix when missing)."""
    rows = []
    for name, fn, fix in CHECKS:
        status, detail = _probe(fn)
        rows.append((name, status, detail, fix if status == MISSING else ""))
    return rows


def main() -> int:
    import tinytrain

    print(f"tinytrain {tinytrain.__version__} on {platform.system()} {platform.machine()}, "
          f"{os.cpu_count()} CPU cores")
    rows = report()
    for name, status, detail, fix in rows:
        print(f"  [{status}] {name:<14} {detail}")
        if fix:
            print(f"  {'':<5}{'':<14} -> {fix}")
    required_ok = all(status == OK for name, status, _, _ in rows if name in REQUIRED)
    print("CPU chapters and tests need the python and numpy lines; the rest is optional.")
    return 0 if required_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
