"""Every .cu file compiles with NVRTC, on this machine, without a GPU (CuPy is not needed:
NVRTC is called through ctypes, from the nvidia-cuda-nvrtc-cu12 wheel of the dev extra)."""

from __future__ import annotations

import os

import pytest

from tinytrain.kernels.cuda import emulator, nvrtc


def nvrtc_or_skip() -> None:
    try:
        nvrtc.library()
    except nvrtc.NVRTCError as exc:
        if os.environ.get("CI"):  # CI installs the dev extra: NVRTC must be there
            raise
        pytest.skip(str(exc))


@pytest.mark.parametrize("path", sorted(emulator.SOURCE_DIR.glob("*.cu")), ids=lambda p: p.name)
def test_every_source_compiles_to_ptx_for_both_dtypes_and_index_widths(path):
    nvrtc_or_skip()
    from tinytrain.kernels.cuda.runtime import source

    for dtype in ("float32", "float64"):
        for wide in (False, True):
            ptx = nvrtc.compile_ptx(source(path.stem, dtype, wide), path.name)
            for name in emulator.load(path.stem, dtype, wide).kernels:
                assert f".entry {name}(" in ptx, f"{path.name}: no entry point {name} in the PTX"


@pytest.mark.parametrize("path", sorted(emulator.SOURCE_DIR.glob("*.cu")), ids=lambda p: p.name)
def test_every_source_compiles_alone_as_nvcc_would_see_it(path):
    """The file as it is, without the launcher's typedefs (``nvcc --ptx file.cu``)."""
    nvrtc_or_skip()
    ptx = nvrtc.compile_ptx(path.read_text(), path.name)
    for name in emulator.load(path.stem).kernels:
        assert f".entry {name}(" in ptx, f"{path.name}: no entry point {name} in the PTX"


def test_all_sources_compile_as_the_one_module_the_gpu_loads():
    nvrtc_or_skip()
    from tinytrain.kernels.cuda.runtime import module_source

    names = {n for p in emulator.SOURCE_DIR.glob("*.cu") for n in emulator.load(p.stem).kernels}
    for dtype in ("float32", "float64"):
        for wide in (False, True):
            ptx = nvrtc.compile_ptx(module_source(dtype, wide), "tinytrain.cu")
            assert {n for n in names if f".entry {n}(" in ptx} == names


def test_a_compile_error_comes_back_with_nvrtcs_log():
    nvrtc_or_skip()
    with pytest.raises(nvrtc.NVRTCError, match=r"(?s)bad\.cu does not compile:.*identifier "
                                               r"\"undeclared\" is undefined"):
        nvrtc.compile_ptx('extern "C" __global__ void k(float* x) { x[0] = undeclared; }',
                          "bad.cu")


def test_doctor_reports_the_kernels_compile():
    nvrtc_or_skip()
    from tinytrain import doctor

    status, detail = doctor._probe(doctor._cuda_kernels)
    assert status == doctor.OK and "5 .cu files compile to PTX" in detail, detail
