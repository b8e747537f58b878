"""Compile the ``.cu`` files to PTX with NVRTC, on any machine: no GPU, no CuPy needed.

NVRTC (CUDA's run-time compiler) is a plain shared library; the ``nvidia-cuda-nvrtc-cu12``
wheel installs it on a CPU-only machine. This module calls it through ``ctypes`` with the
options CuPy's ``RawModule`` uses on the device (:data:`OPTIONS`), so the CPU tests and
``python -m tinytrain.doctor`` know that every kernel compiles before a GPU sees it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import os
import sys
from pathlib import Path

from tinytrain.kernels.cuda.runtime import OPTIONS, SOURCE_DIR, source

__all__ = ["NVRTCError", "compile_ptx", "compile_sources", "library", "version"]

#: What CuPy passes to NVRTC for a RawModule on an H200 (compute capability 9.0), plus ours.
ARCH = "compute_90"
CUPY_OPTIONS = (f"-arch={ARCH}", "-ftz=true", "--device-as-default-execution-space")


class NVRTCError(RuntimeError):
    """NVRTC is missing, or a source does not compile (the message holds NVRTC's log)."""


_lib: ctypes.CDLL | None = None


def _candidates() -> list[str]:
    """Where libnvrtc may be: the pip wheels (cu12, cu13), CUDA_PATH, the loader's path."""
    found = []
    try:  # CuPy's helper (cuda-pathfinder) knows every layout of the NVIDIA wheels
        from cuda.pathfinder import load_nvidia_dynamic_lib

        found.append(load_nvidia_dynamic_lib("nvrtc").abs_path)
    except Exception:
        pass
    for site in sys.path:
        found += sorted(glob.glob(os.path.join(site, "nvidia", "**", "libnvrtc.so*"),
                                  recursive=True))
    if os.environ.get("CUDA_PATH"):
        found += sorted(glob.glob(os.path.join(os.environ["CUDA_PATH"], "lib*", "libnvrtc.so*")))
    name = ctypes.util.find_library("nvrtc")
    if name:
        found.append(name)
    return [f for f in found if f and "builtins" not in Path(f).name and ".alt." not in f]


def library() -> ctypes.CDLL:
    """The loaded NVRTC library, or an NVRTCError saying how to get one."""
    global _lib
    if _lib is None:
        errors = []
        for path in _candidates():
            try:
                _lib = ctypes.CDLL(path)
                break
            except OSError as exc:
                errors.append(f"{path}: {exc}")
        else:
            raise NVRTCError(
                "NVRTC not found: pip install nvidia-cuda-nvrtc-cu12 (it works without a GPU)"
                + (f"; tried {'; '.join(errors)}" if errors else ""))
        _lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    return _lib


def version() -> tuple[int, int]:
    major, minor = ctypes.c_int(), ctypes.c_int()
    library().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def _check(status: int, what: str) -> None:
    if status != 0:
        raise NVRTCError(f"{what}: {library().nvrtcGetErrorString(status).decode()}")


@functools.lru_cache(maxsize=64)
def compile_ptx(code: str, name: str = "kernel.cu", options: tuple[str, ...] = ()) -> str:
    """PTX for CUDA C ``code``; an NVRTCError with the compiler's log if it does not compile."""
    lib = library()
    prog = ctypes.c_void_p()
    _check(lib.nvrtcCreateProgram(ctypes.byref(prog), code.encode(), name.encode(), 0, None,
                                  None), "nvrtcCreateProgram")
    try:
        opts = [o.encode() for o in (*CUPY_OPTIONS, *OPTIONS, *options)]
        status = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        if status != 0:
            raise NVRTCError(f"{name} does not compile:\n{log.value.decode(errors='replace')}")
        lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
        ptx = ctypes.create_string_buffer(size.value)
        _check(lib.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
        return ptx.value.decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def compile_sources() -> dict[str, str]:
    """``{"conv2d.cu (float, int)": ptx, ...}``: every source of the package, for both dtypes
    and both index widths."""
    out = {}
    for path in sorted(SOURCE_DIR.glob("*.cu")):
        for dtype, real in (("float32", "float"), ("float64", "double")):
            for wide, index in ((False, "int"), (True, "long long")):
                out[f"{path.name} ({real}, {index})"] = compile_ptx(
                    source(path.stem, dtype, wide), path.name)
    return out
