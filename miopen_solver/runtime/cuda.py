"""NVIDIA runtime on cuda-python: ``cuda.bindings.driver`` + ``cuda.bindings.nvrtc``.

Thin and explicit: every call's return code is checked where it is returned
(:func:`_ok`), and a failure raises with the API name and the CUDA error name.
Kernels are compiled by NVRTC to a cubin for the device's exact arch (``sm_90a`` on
Hopper, so Hopper-only instructions are allowed). The kernel sources include no headers,
so no include path is needed.
"""

from __future__ import annotations

import numpy as np

from ..errors import CompileError, RuntimeUnavailable
from ..target import Target, compile_arch, from_device


class CudaError(RuntimeError):
    """A CUDA driver or NVRTC call failed (message names the call and the error)."""


def _import():
    try:
        from cuda.bindings import driver, nvrtc
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise RuntimeUnavailable(
            f"no CUDA runtime found: cuda-python is not installed ({e}); install the 'cuda' extra") from None
    return driver, nvrtc


class CudaRuntime:
    """One NVIDIA device (ordinal 0 by default), its primary context and a stream."""

    name = "cuda"
    vendor = "nvidia"

    def __init__(self, ordinal: int = 0):
        drv, nvrtc = _import()
        self._drv, self._nvrtc = drv, nvrtc
        try:
            (err,) = drv.cuInit(0)
        except Exception as e:  # libcuda missing: cuda-python raises on first call
            raise RuntimeUnavailable(f"no CUDA driver found: {e}") from None
        if err != drv.CUresult.CUDA_SUCCESS:
            raise RuntimeUnavailable(f"no NVIDIA GPU found: cuInit returned {self._errname(err)}")
        count = self._ok(drv.cuDeviceGetCount(), "cuDeviceGetCount")
        if count <= ordinal:
            raise RuntimeUnavailable(f"no NVIDIA GPU found: {count} CUDA devices, wanted ordinal {ordinal}")
        self.device = self._ok(drv.cuDeviceGet(ordinal), "cuDeviceGet")
        self.context = self._ok(drv.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        self._ok(drv.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self.stream = self._ok(drv.cuStreamCreate(0), "cuStreamCreate")
        self._target = None

    # ----------------------------------------------------------------- checking
    def _errname(self, err) -> str:
        try:
            e, name = self._drv.cuGetErrorName(err)
            return name.decode() if isinstance(name, bytes) else str(name)
        except Exception:
            return str(err)

    def _ok(self, result, call: str):
        """Check a cuda-python result tuple; return its payload (None, a value or a tuple)."""
        err, rest = result[0], result[1:]
        if isinstance(err, self._nvrtc.nvrtcResult):
            if err != self._nvrtc.nvrtcResult.NVRTC_SUCCESS:
                raise CudaError(f"{call} failed: {err.name}")
        elif err != self._drv.CUresult.CUDA_SUCCESS:
            raise CudaError(f"{call} failed: {self._errname(err)}")
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else rest

    def _attr(self, name: str) -> int:
        a = getattr(self._drv.CUdevice_attribute, name)
        return self._ok(self._drv.cuDeviceGetAttribute(a, self.device), f"cuDeviceGetAttribute({name})")

    # ----------------------------------------------------------------- device
    def target(self) -> Target:
        """The device as a Target (arch ``sm_<major><minor>``, its shared memory and SMs)."""
        if self._target is None:
            major = self._attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
            minor = self._attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
            self._target = from_device(
                "nvidia", f"sm_{major}{minor}",
                lds_bytes=self._attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
                max_threads=self._attr("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"),
                num_cus=self._attr("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
                wave_size=self._attr("CU_DEVICE_ATTRIBUTE_WARP_SIZE"))
        return self._target

    def device_name(self) -> str:
        raw = self._ok(self._drv.cuDeviceGetName(256, self.device), "cuDeviceGetName")
        return raw.split(b"\0")[0].decode()

    # ----------------------------------------------------------------- compile / load
    def compiler_id(self) -> str:
        major, minor = self._ok(self._nvrtc.nvrtcVersion(), "nvrtcVersion")
        return f"nvrtc-{major}.{minor}"

    def compile_options(self, arch: str) -> list:
        gpu = compile_arch(arch)
        return [f"--gpu-architecture={gpu}", "-std=c++17", "--extra-device-vectorization"]

    def compile(self, text: str, name: str, arch: str) -> bytes:
        """NVRTC -> cubin bytes. Raises CompileError with the log."""
        nv = self._nvrtc
        prog = self._ok(nv.nvrtcCreateProgram(text.encode(), f"{name}.cu".encode(), 0, [], []),
                        "nvrtcCreateProgram")
        try:
            opts = [o.encode() for o in self.compile_options(arch)]
            (err,) = nv.nvrtcCompileProgram(prog, len(opts), opts)
            if err != nv.nvrtcResult.NVRTC_SUCCESS:
                size = self._ok(nv.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
                log = b" " * size
                self._ok(nv.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
                raise CompileError(f"NVRTC failed for {name}:\n{log.decode(errors='replace')}")
            size = self._ok(nv.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            buf = b" " * size
            self._ok(nv.nvrtcGetCUBIN(prog, buf), "nvrtcGetCUBIN")
            return bytes(buf)
        finally:
            self._ok(nv.nvrtcDestroyProgram(prog), "nvrtcDestroyProgram")

    def load(self, binary: bytes, name: str, shared_bytes: int = 0):
        """Load a cubin and return the named function, with its dynamic shared-memory limit
        raised when it needs more than the default 48 KiB."""
        drv = self._drv
        module = self._ok(drv.cuModuleLoadData(binary), "cuModuleLoadData")
        func = self._ok(drv.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")
        if shared_bytes > 48 * 1024:
            self._ok(drv.cuFuncSetAttribute(
                func, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_bytes),
                "cuFuncSetAttribute")
        return func

    def function_registers(self, func) -> int:
        a = self._drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS
        return self._ok(self._drv.cuFuncGetAttribute(a, func), "cuFuncGetAttribute")

    def function_resources(self, func) -> dict:
        """What the loaded binary uses: ``registers`` per thread, ``static_shared`` and
        ``local`` (spill/stack) bytes per thread (CUDA function attributes)."""
        attr = self._drv.CUfunction_attribute
        get = lambda a: int(self._ok(self._drv.cuFuncGetAttribute(a, func), "cuFuncGetAttribute"))  # noqa: E731
        return {"registers": get(attr.CU_FUNC_ATTRIBUTE_NUM_REGS),
                "static_shared": get(attr.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
                "local": get(attr.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)}

    # ----------------------------------------------------------------- memory
    def mem_info(self) -> tuple:
        """``(free, total)`` bytes of the device's memory (``cuMemGetInfo``)."""
        free, total = self._ok(self._drv.cuMemGetInfo(), "cuMemGetInfo")
        return int(free), int(total)

    def alloc(self, nbytes: int) -> int:
        return int(self._ok(self._drv.cuMemAlloc(max(1, nbytes)), "cuMemAlloc"))

    def free(self, ptr: int):
        self._ok(self._drv.cuMemFree(ptr), "cuMemFree")

    def copy_to_device(self, ptr: int, host: np.ndarray):
        host = np.ascontiguousarray(host)
        self._ok(self._drv.cuMemcpyHtoD(ptr, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")

    def copy_to_host(self, host: np.ndarray, ptr: int):
        self._ok(self._drv.cuMemcpyDtoH(host.ctypes.data, ptr, host.nbytes), "cuMemcpyDtoH")

    def memset(self, ptr: int, byte: int, nbytes: int):
        """Fill ``nbytes`` with ``byte`` on the runtime's stream (asynchronous)."""
        self._ok(self._drv.cuMemsetD8Async(ptr, byte, nbytes, self.stream), "cuMemsetD8Async")

    def synchronize(self):
        self._ok(self._drv.cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    # ----------------------------------------------------------------- tensor maps
    def tensor_map(self, ptr: int, desc) -> bytes:
        """The 128-byte CUtensorMap for ``desc`` (a :class:`~miopen_solver.kernels.emit.
        TensorMapDesc`) over the device buffer at ``ptr``: its swizzle (128, 64 or 0 bytes), no interleave,
        256-byte L2 promotion, zeros outside the tensor (``cuTensorMapEncodeTiled``).

        Raises:
            RuntimeError: the driver refuses the map (its error name and the map's shape).
        """
        drv = self._drv
        dtype = {"fp16": drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                 "bf16": drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16}[desc.dtype]
        u64, u32 = drv.cuuint64_t, drv.cuuint32_t
        err, tmap = drv.cuTensorMapEncodeTiled(
            dtype, len(desc.dims), ptr, [u64(d) for d in desc.dims], [u64(s) for s in desc.strides],
            [u32(b) for b in desc.box], [u32(1)] * len(desc.dims),
            drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            {0: drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE, 64: drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B,
             128: drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B}[getattr(desc, "swizzle", 128)],
            drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
        if err != drv.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuTensorMapEncodeTiled failed ({self._errname(err)}) for {desc.operand}: "
                               f"dims {desc.dims}, strides {desc.strides} bytes, box {desc.box}")
        return np.array(tmap.opaque, dtype=np.uint64).tobytes()

    # ----------------------------------------------------------------- launch
    @staticmethod
    def _params(args) -> tuple:
        """The kernel-parameter array of ``args`` (device pointers as ints, by-value
        parameters such as tensor maps as their bytes): ``(values, pointers)``; both must live
        until the launch call returns."""
        vals = [np.frombuffer(a, dtype=np.uint8).copy() if isinstance(a, bytes) else np.array([a], dtype=np.uint64)
                for a in args]
        return vals, np.array([v.ctypes.data for v in vals], dtype=np.uint64)

    def launch(self, func, grid, block, shared_bytes: int, args):
        """Launch ``func`` on the runtime's stream. ``args`` are device pointers (ints) or,
        for by-value parameters such as tensor maps, their bytes."""
        _vals, params = self._params(args)
        self._ok(self._drv.cuLaunchKernel(func, *grid, *block, shared_bytes, self.stream,
                                          params.ctypes.data, 0), "cuLaunchKernel")

    @property
    def programmatic_launch(self) -> bool:
        """Whether :meth:`launch_dependent` overlaps a launch with the stream's previous kernel:
        programmatic dependent launch needs compute capability 9.0 or newer."""
        return self._attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR") >= 9

    def launch_dependent(self, func, grid, block, shared_bytes: int, args):
        """:meth:`launch` with programmatic stream serialization (``cuLaunchKernelEx``,
        ``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION``): the grid may begin launching
        while the stream's previous kernel runs, and its ``griddepcontrol.wait`` (every kernel
        source's first statement on sm_90+) holds it until that kernel has completed and its
        writes are visible. Captured into a graph it becomes a programmatic edge."""
        drv = self._drv
        _vals, params = self._params(args)
        cfg = drv.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = (int(g) for g in grid)
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = (int(b) for b in block)
        cfg.sharedMemBytes = int(shared_bytes)
        cfg.hStream = self.stream
        attr = drv.CUlaunchAttribute()
        attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        attr.value.programmaticStreamSerializationAllowed = 1
        cfg.attrs = [attr]
        cfg.numAttrs = 1
        self._ok(drv.cuLaunchKernelEx(cfg, func, params.ctypes.data, 0), "cuLaunchKernelEx")

    # ----------------------------------------------------------------- events / graphs
    def event(self):
        return self._ok(self._drv.cuEventCreate(self._drv.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")

    def record(self, ev):
        self._ok(self._drv.cuEventRecord(ev, self.stream), "cuEventRecord")

    def elapsed_ms(self, start, end) -> float:
        self._ok(self._drv.cuEventSynchronize(end), "cuEventSynchronize")
        fn = getattr(self._drv, "cuEventElapsedTime_v2", None) or self._drv.cuEventElapsedTime
        return float(self._ok(fn(start, end), "cuEventElapsedTime"))

    def capture(self, body):
        """Capture the launches ``body()`` issues on the stream into an executable graph."""
        drv = self._drv
        self._ok(drv.cuStreamBeginCapture(self.stream, drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                 "cuStreamBeginCapture")
        try:
            body()
        finally:
            graph = self._ok(drv.cuStreamEndCapture(self.stream), "cuStreamEndCapture")
        return self._ok(drv.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")

    def replay(self, graph_exec):
        self._ok(self._drv.cuGraphLaunch(graph_exec, self.stream), "cuGraphLaunch")
