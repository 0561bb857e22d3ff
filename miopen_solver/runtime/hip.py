"""AMD runtime on hip-python: ``hip`` (module loading, memory, launches, events) and
``hiprtc`` (compilation to a code object for the device's gfx arch).

hip-python is imported lazily, here only, so the CUDA and CPU paths never need it. Its
libraries are opened at the first call; a missing ROCm gives :class:`RuntimeUnavailable`
with one sentence. Every return code is checked where it is returned (:meth:`_ok`).

Status: tested up to the launch against a fake hip-python (tests/test_hip_runtime.py) and
exercised only up to "no ROCm runtime found" on real machines without ROCm; it has not run
on AMD hardware (see README).
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..errors import CompileError, RuntimeUnavailable
from ..target import Target, from_device


class HipError(RuntimeError):
    """A HIP or hiprtc call failed (message names the call and the error)."""


def _import():
    try:
        from hip import hip, hiprtc
    except ImportError as e:
        raise RuntimeUnavailable(f"no ROCm runtime found: hip-python is not installed ({e})") from None
    return hip, hiprtc


class HipRuntime:
    """One AMD device (ordinal 0 by default) and a stream."""

    name = "hip"
    vendor = "amd"

    def __init__(self, ordinal: int = 0):
        hip, hiprtc = _import()
        self._hip, self._rtc = hip, hiprtc
        try:
            err, count = hip.hipGetDeviceCount()
        except RuntimeError as e:  # libamdhip64.so missing: raised at the first call
            raise RuntimeUnavailable(f"no ROCm runtime found: {e}") from None
        if err != hip.hipError_t.hipSuccess or count <= ordinal:
            raise RuntimeUnavailable(f"no AMD GPU found: hipGetDeviceCount returned {err}, {count} devices")
        self.ordinal = ordinal
        self._ok(hip.hipSetDevice(ordinal), "hipSetDevice")
        self.stream = self._ok(hip.hipStreamCreate(), "hipStreamCreate")
        self._target = None

    def _ok(self, result, call: str):
        if not isinstance(result, tuple):
            result = (result,)
        err, rest = result[0], result[1:]
        if isinstance(err, self._rtc.hiprtcResult):
            if err != self._rtc.hiprtcResult.HIPRTC_SUCCESS:
                raise HipError(f"{call} failed: {err.name}")
        elif err != self._hip.hipError_t.hipSuccess:
            raise HipError(f"{call} failed: {getattr(err, 'name', err)}")
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else rest

    # ----------------------------------------------------------------- device
    def _props(self):
        """hipGetDeviceProperties in both hip-python signatures: ``(deviceId) -> (err, props)``
        (newer) and ``(props, deviceId) -> (err,)`` (6.x)."""
        hip = self._hip
        try:
            return self._ok(hip.hipGetDeviceProperties(self.ordinal), "hipGetDeviceProperties")
        except TypeError:
            props = hip.hipDeviceProp_t()
            self._ok(hip.hipGetDeviceProperties(props, self.ordinal), "hipGetDeviceProperties")
            return props

    def target(self) -> Target:
        if self._target is None:
            p = self._props()
            arch = p.gcnArchName.decode() if isinstance(p.gcnArchName, bytes) else str(p.gcnArchName)
            self._target = from_device("amd", arch.split(":")[0], lds_bytes=int(p.sharedMemPerBlock),
                                       max_threads=int(p.maxThreadsPerBlock),
                                       num_cus=int(p.multiProcessorCount), wave_size=int(p.warpSize))
        return self._target

    def device_name(self) -> str:
        n = self._props().name
        return n.decode().rstrip("\0") if isinstance(n, bytes) else str(n)

    # ----------------------------------------------------------------- compile / load
    def compiler_id(self) -> str:
        major, minor = self._ok(self._rtc.hiprtcVersion(), "hiprtcVersion")
        return f"hiprtc-{major}.{minor}"

    def compile_options(self, arch: str) -> list:
        return [f"--offload-arch={arch}", "-O3", "-std=c++17"]

    def compile(self, text: str, name: str, arch: str) -> bytes:
        rtc = self._rtc
        prog = self._ok(rtc.hiprtcCreateProgram(text.encode(), f"{name}.hip".encode(), 0, [], []),
                        "hiprtcCreateProgram")
        try:
            opts = [o.encode() for o in self.compile_options(arch)]
            (err,) = rtc.hiprtcCompileProgram(prog, len(opts), opts)
            if err != rtc.hiprtcResult.HIPRTC_SUCCESS:
                size = self._ok(rtc.hiprtcGetProgramLogSize(prog), "hiprtcGetProgramLogSize")
                log = bytearray(size)
                self._ok(rtc.hiprtcGetProgramLog(prog, log), "hiprtcGetProgramLog")
                raise CompileError(f"hiprtc failed for {name}:\n{bytes(log).decode(errors='replace')}")
            size = self._ok(rtc.hiprtcGetCodeSize(prog), "hiprtcGetCodeSize")
            code = bytearray(size)
            self._ok(rtc.hiprtcGetCode(prog, code), "hiprtcGetCode")
            return bytes(code)
        finally:
            self._ok(rtc.hiprtcDestroyProgram(prog), "hiprtcDestroyProgram")

    def load(self, binary: bytes, name: str, shared_bytes: int = 0):
        module = self._ok(self._hip.hipModuleLoadData(binary), "hipModuleLoadData")
        return self._ok(self._hip.hipModuleGetFunction(module, name.encode()), f"hipModuleGetFunction({name})")

    def function_resources(self, func) -> None:
        """Not read on HIP (no AMD device has run this code): the binary check is skipped;
        offline builds report VGPRs/scratch instead (``kernels.offline``)."""
        return None

    # ----------------------------------------------------------------- memory
    def mem_info(self) -> tuple:
        """``(free, total)`` bytes of the device's memory (``hipMemGetInfo``)."""
        free, total = self._ok(self._hip.hipMemGetInfo(), "hipMemGetInfo")
        return int(free), int(total)

    def alloc(self, nbytes: int) -> int:
        return int(self._ok(self._hip.hipMalloc(max(1, nbytes)), "hipMalloc"))

    def free(self, ptr: int):
        self._ok(self._hip.hipFree(ptr), "hipFree")

    def copy_to_device(self, ptr: int, host: np.ndarray):
        host = np.ascontiguousarray(host)
        self._ok(self._hip.hipMemcpyHtoD(ptr, host.ctypes.data, host.nbytes), "hipMemcpyHtoD")

    def copy_to_host(self, host: np.ndarray, ptr: int):
        self._ok(self._hip.hipMemcpyDtoH(host.ctypes.data, ptr, host.nbytes), "hipMemcpyDtoH")

    def memset(self, ptr: int, byte: int, nbytes: int):
        self._ok(self._hip.hipMemsetD8Async(ptr, byte, nbytes, self.stream), "hipMemsetD8Async")

    def synchronize(self):
        self._ok(self._hip.hipStreamSynchronize(self.stream), "hipStreamSynchronize")

    # ----------------------------------------------------------------- launch
    def launch(self, func, grid, block, shared_bytes: int, pointers):
        args = tuple(ctypes.c_void_p(p) for p in pointers)
        self._ok(self._hip.hipModuleLaunchKernel(func, *grid, *block, shared_bytes, self.stream, None, args),
                 "hipModuleLaunchKernel")

    # ----------------------------------------------------------------- events / graphs
    def event(self):
        return self._ok(self._hip.hipEventCreate(), "hipEventCreate")

    def record(self, ev):
        self._ok(self._hip.hipEventRecord(ev, self.stream), "hipEventRecord")

    def elapsed_ms(self, start, end) -> float:
        self._ok(self._hip.hipEventSynchronize(end), "hipEventSynchronize")
        return float(self._ok(self._hip.hipEventElapsedTime(start, end), "hipEventElapsedTime"))

    def capture(self, body):
        hip = self._hip
        self._ok(hip.hipStreamBeginCapture(self.stream, hip.hipStreamCaptureMode.hipStreamCaptureModeThreadLocal),
                 "hipStreamBeginCapture")
        try:
            body()
        finally:
            graph = self._ok(hip.hipStreamEndCapture(self.stream), "hipStreamEndCapture")
        out = self._ok(hip.hipGraphInstantiate(graph, 0), "hipGraphInstantiate")
        return out[0] if isinstance(out, tuple) else out

    def replay(self, graph_exec):
        self._ok(self._hip.hipGraphLaunch(graph_exec, self.stream), "hipGraphLaunch")
