"""The HIP runtime wrapper (runtime/hip.py) up to the launch, on CPU: a fake ``hip``
package stands in for hip-python with its calling convention (every call returns a tuple
whose first element is a ``hipError_t`` or ``hiprtcResult``; both
``hipGetDeviceProperties`` signatures). Nothing here touches ROCm or an AMD GPU; what the
fake cannot show (the real library's behaviour) is said in README: nothing has run on AMD
hardware.
"""

from __future__ import annotations

import ctypes
import enum
import sys
import types

import numpy as np
import pytest

from miopen_solver.command import parse
from miopen_solver.errors import RuntimeUnavailable
from miopen_solver.runtime.gpu import GpuEngine
from miopen_solver.runtime.cache import BinaryCache
from miopen_solver.spec import make_spec
from miopen_solver.heuristics import default_performance_config


class hipError_t(enum.IntEnum):
    hipSuccess = 0
    hipErrorInvalidValue = 1
    hipErrorOutOfMemory = 2


class hiprtcResult(enum.IntEnum):
    HIPRTC_SUCCESS = 0
    HIPRTC_ERROR_COMPILATION = 6


OK, RTC_OK = hipError_t.hipSuccess, hiprtcResult.HIPRTC_SUCCESS


class Props:
    gcnArchName = b"gfx942:sramecc+:xnack-"
    name = b"AMD Instinct MI300X\0\0"
    sharedMemPerBlock = 65536
    maxThreadsPerBlock = 1024
    multiProcessorCount = 304
    warpSize = 64


def fake_hip(*, devices=1, old_props_signature=False, compile_ok=True, lib_missing=False, fail=None):
    """A ``hip`` package: ``hip.hip`` and ``hip.hiprtc`` with recording functions."""
    calls = []

    def rec(name, result):
        def f(*args):
            calls.append((name, args))
            if fail == name:
                return (hipError_t.hipErrorOutOfMemory,)
            return result(*args) if callable(result) else result
        return f

    def device_count():
        if lib_missing:
            raise RuntimeError("libamdhip64.so: cannot open shared object file")
        calls.append(("hipGetDeviceCount", ()))
        return OK, devices

    def props(*args):
        calls.append(("hipGetDeviceProperties", args))
        if old_props_signature:
            if len(args) != 2:
                raise TypeError("hipGetDeviceProperties() takes 2 arguments")
            return (OK,)
        if len(args) != 1:
            raise TypeError("hipGetDeviceProperties() takes 1 argument")
        return OK, Props()

    hip = types.SimpleNamespace(
        hipError_t=hipError_t, hipDeviceProp_t=Props,
        hipStreamCaptureMode=types.SimpleNamespace(hipStreamCaptureModeThreadLocal=1),
        hipGetDeviceCount=device_count, hipGetDeviceProperties=props,
        hipSetDevice=rec("hipSetDevice", (OK,)), hipStreamCreate=rec("hipStreamCreate", (OK, "stream0")),
        hipModuleLoadData=rec("hipModuleLoadData", (OK, "module0")),
        hipModuleGetFunction=rec("hipModuleGetFunction", (OK, "function0")),
        hipMalloc=rec("hipMalloc", (OK, 0x7000)), hipFree=rec("hipFree", (OK,)),
        hipMemGetInfo=rec("hipMemGetInfo", (OK, 48 << 30, 192 << 30)),
        hipMemcpyHtoD=rec("hipMemcpyHtoD", (OK,)), hipMemcpyDtoH=rec("hipMemcpyDtoH", (OK,)),
        hipMemsetD8Async=rec("hipMemsetD8Async", (OK,)), hipStreamSynchronize=rec("hipStreamSynchronize", (OK,)),
        hipModuleLaunchKernel=rec("hipModuleLaunchKernel", (OK,)),
        hipEventCreate=rec("hipEventCreate", (OK, "event")), hipEventRecord=rec("hipEventRecord", (OK,)),
        hipEventSynchronize=rec("hipEventSynchronize", (OK,)),
        hipEventElapsedTime=rec("hipEventElapsedTime", (OK, 0.25)),
        hipStreamBeginCapture=rec("hipStreamBeginCapture", (OK,)),
        hipStreamEndCapture=rec("hipStreamEndCapture", (OK, "graph")),
        hipGraphInstantiate=rec("hipGraphInstantiate", (OK, "graph_exec", None, None)),
        hipGraphLaunch=rec("hipGraphLaunch", (OK,)))

    def get_code(prog, buf):
        buf[:] = b"\x7fELF-code-object"
        calls.append(("hiprtcGetCode", (prog,)))
        return (RTC_OK,)

    def get_log(prog, buf):
        buf[:] = b"error: expected ';'"
        return (RTC_OK,)

    rtc = types.SimpleNamespace(
        hiprtcResult=hiprtcResult, hiprtcVersion=rec("hiprtcVersion", (RTC_OK, 6, 2)),
        hiprtcCreateProgram=rec("hiprtcCreateProgram", (RTC_OK, "prog")),
        hiprtcCompileProgram=rec("hiprtcCompileProgram",
                                 (RTC_OK,) if compile_ok else (hiprtcResult.HIPRTC_ERROR_COMPILATION,)),
        hiprtcGetProgramLogSize=rec("hiprtcGetProgramLogSize", (RTC_OK, 19)), hiprtcGetProgramLog=get_log,
        hiprtcGetCodeSize=rec("hiprtcGetCodeSize", (RTC_OK, 16)), hiprtcGetCode=get_code,
        hiprtcDestroyProgram=rec("hiprtcDestroyProgram", (RTC_OK,)))
    pkg = types.ModuleType("hip")
    pkg.hip, pkg.hiprtc = hip, rtc
    return pkg, calls


@pytest.fixture
def install(monkeypatch):
    def _install(**kw):
        pkg, calls = fake_hip(**kw)
        monkeypatch.setitem(sys.modules, "hip", pkg)
        monkeypatch.setitem(sys.modules, "hip.hip", pkg.hip)
        monkeypatch.setitem(sys.modules, "hip.hiprtc", pkg.hiprtc)
        from miopen_solver.runtime.hip import HipRuntime
        return HipRuntime, calls
    return _install


def test_missing_hip_python_is_one_sentence(monkeypatch):
    monkeypatch.setitem(sys.modules, "hip", None)            # import hip -> ImportError
    from miopen_solver.runtime.hip import HipRuntime
    with pytest.raises(RuntimeUnavailable, match="^no ROCm runtime found: hip-python is not installed"):
        HipRuntime()


@pytest.mark.parametrize("kw,match", [(dict(lib_missing=True), "^no ROCm runtime found: libamdhip64"),
                                      (dict(devices=0), "^no AMD GPU found")])
def test_no_rocm_or_no_device(install, kw, match):
    HipRuntime, _ = install(**kw)
    with pytest.raises(RuntimeUnavailable, match=match):
        HipRuntime()


@pytest.mark.parametrize("old", [False, True])
def test_target_from_either_properties_signature(install, old):
    HipRuntime, calls = install(old_props_signature=old)
    rt = HipRuntime()
    t = rt.target()
    assert (t.vendor, t.arch, t.wave_size, t.lds_bytes, t.max_threads, t.num_cus) == \
        ("amd", "gfx942", 64, 65536, 1024, 304)
    assert rt.device_name() == "AMD Instinct MI300X"
    assert rt.compiler_id() == "hiprtc-6.2"


def test_compile_returns_the_code_object_and_destroys_the_program(install):
    HipRuntime, calls = install()
    rt = HipRuntime()
    assert rt.compile("kernel text", "k", "gfx942") == b"\x7fELF-code-object"
    names = [c[0] for c in calls]
    assert names.index("hiprtcCompileProgram") < names.index("hiprtcGetCode") < names.index("hiprtcDestroyProgram")
    opts = next(a for n, a in calls if n == "hiprtcCompileProgram")[2]
    assert opts == [b"--offload-arch=gfx942", b"-O3", b"-std=c++17"]


def test_compile_failure_carries_the_log_and_still_destroys(install):
    from miopen_solver.errors import CompileError
    HipRuntime, calls = install(compile_ok=False)
    with pytest.raises(CompileError, match="hiprtc failed for k:\nerror: expected ';'"):
        HipRuntime().compile("bad", "k", "gfx942")
    assert calls[-1][0] == "hiprtcDestroyProgram"


@pytest.mark.parametrize("call,invoke", [
    ("hipMalloc", lambda rt: rt.alloc(64)),
    ("hipModuleLaunchKernel", lambda rt: rt.launch("f", (1, 1, 1), (64, 1, 1), 0, (1, 2, 3))),
    ("hipMemcpyHtoD", lambda rt: rt.copy_to_device(0x7000, np.zeros(4, np.float32))),
    ("hipStreamSynchronize", lambda rt: rt.synchronize()),
    ("hipMemGetInfo", lambda rt: rt.mem_info()),
])
def test_every_error_code_is_checked_where_returned(install, call, invoke):
    from miopen_solver.runtime.hip import HipError
    HipRuntime, _ = install(fail=call)
    with pytest.raises(HipError, match=f"^{call}.* failed: hipErrorOutOfMemory$"):
        invoke(HipRuntime())


def test_launch_passes_pointers_stream_and_shared_memory(install):
    HipRuntime, calls = install()
    rt = HipRuntime()
    rt.launch("function0", (10, 2, 1), (256, 1, 1), 4096, (0x10, 0x20, 0x30))
    args = next(a for n, a in calls if n == "hipModuleLaunchKernel")
    assert args[:8] == ("function0", 10, 2, 1, 256, 1, 1, 4096) and args[8] == "stream0" and args[9] is None
    assert [p.value for p in args[10]] == [0x10, 0x20, 0x30] and all(isinstance(p, ctypes.c_void_p) for p in args[10])
    assert rt.capture(lambda: None) == "graph_exec"
    assert rt.elapsed_ms(rt.event(), rt.event()) == 0.25


def test_engine_builds_the_amd_kernel_and_launches_it(install, tmp_path):
    """GpuEngine on the HIP runtime: the AMD flavour of the kernel text is compiled for the
    device's arch, loaded, and launched with the spec's grid on the runtime's stream, dX
    poisoned before and copied back after."""
    HipRuntime, calls = install()
    eng = GpuEngine(HipRuntime(), cache=BinaryCache(tmp_path))
    p = parse("convfp16 -n 2 -c 64 -H 8 -W 8 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2 "
              "--in_layout NHWC --out_layout NHWC --fil_layout NHWC").problem
    spec = make_spec(p, eng.target, default_performance_config(p, eng.target))
    dy = np.zeros((p.N, p.Ho, p.Wo, p.K), np.float16)
    w = np.zeros((p.K, p.Y, p.X, p.cpg), np.float16)
    eng.run(spec, dy, w)
    text = next(a for n, a in calls if n == "hiprtcCreateProgram")[0].decode()
    assert "#define DG_VENDOR_AMD 1" in text and f"#define DG_KERNEL_NAME {spec.kernel_name}" in text
    names = [n for n, _ in calls]
    launch = next(a for n, a in calls if n == "hipModuleLaunchKernel")
    assert launch[1:4] == spec_grid(spec) and launch[4] == spec.threads
    assert names.index("hipMemsetD8Async") < names.index("hipModuleLaunchKernel") < names.index("hipMemcpyDtoH")
    assert names.count("hipFree") == names.count("hipMalloc") == 3
    assert names.index("hipMemGetInfo") < names.index("hipMalloc")          # room checked first
    # a second engine finds the code object in the cache: no compile
    eng2 = GpuEngine(HipRuntime(), cache=BinaryCache(tmp_path))
    before = names.count("hiprtcCompileProgram")
    eng2.run(spec, dy, w)
    assert [n for n, _ in calls].count("hiprtcCompileProgram") == before


def spec_grid(spec):
    from miopen_solver.kernels.emit import emit
    return tuple(emit(spec).grid)


def test_mem_info_is_free_and_total(install):
    HipRuntime, calls = install()
    assert HipRuntime().mem_info() == (48 << 30, 192 << 30)
    assert calls[-1] == ("hipMemGetInfo", ())

