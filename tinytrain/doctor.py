"""``python -m tinytrain.doctor``: what this machine can run, and what to install.

Learners lose hours on set-up. This prints, in one screen: Python, NumPy and
the BLAS it calls, CuPy with the CUDA driver and GPUs, MPI, the test-time
reference (PyTorch) and Jupyter, and the data sets, each with the command that
fixes what is missing. A data set is "ok" only when all its files are there,
readable, and match the official checksums (it opens them as the training
command would, never downloading). Every probe is guarded: the exit status is 1
only when something required (Python, NumPy) is missing, else 0; a bad
argument is a usage error (exit 2).

    python -m tinytrain.doctor [--data-dir ROOT]
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import importlib
import os
import platform
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

OK, MISSING = "ok", "--"


class _Problem(Exception):
    """A finding worded for this report (shown without the exception's type)."""


def _probe(fn: Callable[[], str]) -> tuple[str, str]:
    try:
        return OK, fn()
    except _Problem as exc:
        return MISSING, str(exc)
    except Exception as exc:  # a doctor reports, it does not crash
        return MISSING, f"{type(exc).__name__}: {exc}".splitlines()[0]


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


NO_GPU = ("no NVIDIA GPU/driver found (a GPU is optional: chapters 4 and 7's GPU parts are "
          "skipped)")


def _nvidia_driver() -> bool:
    """Whether an NVIDIA driver is installed: a /dev/nvidia* device, or libcuda loads."""
    if glob.glob("/dev/nvidia*"):
        return True
    for lib in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            ctypes.CDLL(lib)
            return True
        except OSError:
            pass
    return False


def _cupy() -> str:
    import cupy

    rt = cupy.cuda.runtime
    try:
        n = rt.getDeviceCount()
    except Exception:
        if not _nvidia_driver():  # CuPy then says "driver version is insufficient": there is none
            raise _Problem(NO_GPU) from None
        raise
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
    line = (f"{files} .cu files compile to PTX for float32 and float64, 32- and 64-bit indices "
            f"(NVRTC {major}.{minor})")
    if cuda_is_available():
        line += f"; {len(runtime.compile_all())} kernels load on the GPU"
    return line


def _mpi() -> str:
    from mpi4py import MPI

    from tinytrain.distributed.launch import find_mpiexec

    try:  # the launcher --nproc and chapter 7 use: also the one next to this Python
        launcher = find_mpiexec()
    except FileNotFoundError:
        launcher = shutil.which("mpirun") or "none found (pip install mpich)"
    lib = MPI.Get_library_version().splitlines()[0].strip()
    return f"mpi4py with {lib}; launcher: {launcher}"


def _module_version(name: str) -> Callable[[], str]:
    def probe() -> str:
        mod = importlib.import_module(name)
        return str(getattr(mod, "__version__", "installed"))

    return probe


def _dataset(name: str, root: Path | None) -> Callable[[], str]:
    """Open both splits of data set ``name`` like the training command, without downloading."""
    def probe() -> str:
        from tinytrain.data.datasets import CorruptDataError, MissingDataError, load_dataset

        if root is not None and not root.exists():
            raise _Problem(f"the data root {root} does not exist")
        try:
            train = load_dataset(name, root, train=True, download=False)
            test = load_dataset(name, root, train=False, download=False)
        except CorruptDataError as exc:
            raise _Problem(f"{exc.path} is corrupt or incomplete (wrong checksum)") from None
        except MissingDataError as exc:
            have = f"; {len(exc.found)} of its files found" if exc.found else ""
            raise _Problem(f"{exc.file} is not in {exc.data_dir}{os.sep}{have}") from None
        return (f"{train.image_path.parent}: {len(train):,} + {len(test):,} images, "
                f"checksums ok")

    return probe


def data_checks(root: Path | None = None) -> list[tuple[str, Callable[[], str], str]]:
    """The data-set rows for data root ``root`` (default: $TINYTRAIN_DATA or the cache)."""
    from tinytrain.data.datasets import default_data_root

    root = Path(root).expanduser() if root is not None else None  # as train's --data-dir
    where = root or default_data_root()
    quoted = shlex.quote(str(root))
    flag = f" --data-dir {quoted}" if root else ""
    # (a --data-dir must exist; the default root is made by the download)
    first = f"mkdir -p {quoted}, then " if root and not root.exists() else ""
    fetch = (f"{first}python -m tinytrain.train --dataset {{}}{flag} downloads it into "
             f"{where}/{{}}/ (or copy the four files there; set TINYTRAIN_DATA or "
             f"--data-dir for another root)")
    return [
        ("mnist", _dataset("mnist", root), fetch.format("mnist", "mnist")),
        ("fashion-mnist", _dataset("fashion-mnist", root),
         "optional: " + fetch.format("fashion-mnist", "fashion-mnist")),
        ("mnist-mini", _dataset("mnist-mini", None),
         "ships with a source checkout: git checkout -- assets/mnist-mini"),
    ]


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
]


REQUIRED = ("python", "numpy")


def report(data_root: Path | None = None) -> list[tuple[str, str, str, str]]:
    """One row per check: (name, status, detail, how to fix when missing)."""
    rows = []
    for name, fn, fix in [*CHECKS, *data_checks(data_root)]:
        status, detail = _probe(fn)
        rows.append((name, status, detail, fix if status == MISSING else ""))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Print the report; return the exit status. ``argv`` are the command's arguments (none
    when called from Python, e.g. in a notebook, whose own ``sys.argv`` is not ours)."""
    parser = argparse.ArgumentParser(
        prog="python -m tinytrain.doctor",
        description="Check what this machine can run with tinytrain, and what to install.")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="data root to check (default: $TINYTRAIN_DATA, else the per-user "
                             "cache folder)")
    args = parser.parse_args(argv or [])  # argparse exits 2 on unknown arguments
    import tinytrain

    print(f"tinytrain {tinytrain.__version__} on {platform.system()} {platform.machine()}, "
          f"{os.cpu_count()} CPU cores")
    rows = report(args.data_dir)
    for name, status, detail, fix in rows:
        print(f"  [{status}] {name:<14} {detail}")
        if fix:
            print(f"  {'':<5}{'':<14} -> {fix}")
    required_ok = all(status == OK for name, status, _, _ in rows if name in REQUIRED)
    print("CPU chapters and tests need the python and numpy lines; the rest is optional "
          "(without full MNIST, training falls back to mnist-mini).")
    return 0 if required_ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
