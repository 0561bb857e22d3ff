"""Compile kernels into the binary cache without a device (a compile pool's job).

NVRTC and hiprtc compile for an arch given by name, so a CPU process can fill the kernel
cache (:mod:`miopen_solver.runtime.cache`) while the GPUs time: the timing worker then finds
the binary under the same key (source text, arch, compiler id, options) and loads it. The
compilers here are the runtimes' own :meth:`compile` with no device opened.

The cpu engine compiles nothing (:func:`compiles` is False).
"""

from __future__ import annotations

import time

from .cache import BinaryCache, cache_key


def compiles(backend: str) -> bool:
    """Whether ``backend`` compiles kernels (cuda, hip) -- the cpu engine does not."""
    return backend in ("cuda", "hip")


def device_free_compiler(backend: str):
    """The backend's runtime class with only its compiler loaded (no ``cuInit``, no device,
    no context): ``compile``, ``compile_options`` and ``compiler_id`` work.

    Raises:
        RuntimeUnavailable: the compiler's bindings are not installed.
        ValueError: a backend that compiles nothing.
    """
    if backend == "cuda":
        from . import cuda

        class CudaCompiler(cuda.CudaRuntime):
            def __init__(self):          # NVRTC only: no driver init, no device
                self._drv, self._nvrtc = cuda._import()
        return CudaCompiler()
    if backend == "hip":
        from . import hip

        class HipCompiler(hip.HipRuntime):
            def __init__(self):          # hiprtc only: no device selected, no stream
                self._hip, self._rtc = hip._import()
        return HipCompiler()
    raise ValueError(f"the {backend} engine compiles nothing")


_COMPILERS: dict = {}


def precompile(backend: str, arch: str, source: dict) -> dict:
    """Compile ``source`` (a :meth:`KernelSource.to_record`) for ``arch`` into the kernel
    cache unless it is there. Returns ``{"key", "cache_hit", "compile_ms"}``.

    Raises:
        CompileError: the compiler rejected it (the timing worker will say so again).
    """
    if backend not in _COMPILERS:
        _COMPILERS[backend] = device_free_compiler(backend)
    rt = _COMPILERS[backend]
    opts = rt.compile_options(arch)
    key = cache_key(source["text"], arch, rt.compiler_id(), opts)
    cache = BinaryCache()
    if cache.get(key) is not None:
        return {"key": key, "cache_hit": True, "compile_ms": 0.0}
    t0 = time.perf_counter()
    binary = rt.compile(source["text"], source["name"], arch)
    cache.put(key, binary)
    return {"key": key, "cache_hit": False, "compile_ms": (time.perf_counter() - t0) * 1e3}


__all__ = ["compiles", "device_free_compiler", "precompile"]
