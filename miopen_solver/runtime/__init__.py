"""Backends: ``cpu`` (numpy engine, always there), ``cuda`` (cuda-python + NVRTC),
``hip`` (hip-python + hiprtc). Vendor modules are imported lazily, only when asked for."""

from __future__ import annotations

from ..errors import RuntimeUnavailable

BACKENDS = ("auto", "cpu", "cuda", "hip")


def get_engine(backend: str = "auto"):
    """An engine for ``backend``.

    ``auto`` picks hip where ROCm and an AMD GPU exist, else cuda where an NVIDIA GPU
    exists, else cpu.

    Raises:
        RuntimeUnavailable: an explicit ``cuda``/``hip`` whose runtime or device is missing,
            with one sentence saying which.
        ValueError: an unknown backend name.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend == "cpu":
        from .cpu import CpuEngine
        return CpuEngine()
    if backend == "auto":
        for name in ("hip", "cuda"):
            try:
                return get_engine(name)
            except RuntimeUnavailable:
                continue
        return get_engine("cpu")
    if backend == "cuda":
        from .gpu import GpuEngine
        from .cuda import CudaRuntime
        return GpuEngine(CudaRuntime())
    from .gpu import GpuEngine
    from .hip import HipRuntime
    return GpuEngine(HipRuntime())
