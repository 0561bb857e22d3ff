"""The GPU engine: emit -> compile (cached) -> load -> launch, on any vendor runtime.

A vendor runtime (:class:`~miopen_solver.runtime.cuda.CudaRuntime`,
:class:`~miopen_solver.runtime.hip.HipRuntime`) supplies compile/load/alloc/copy/launch/
events/graphs; this module holds everything that is the same for both. Tensors are NHWC
(dY ``(N, Ho, Wo, K)``, W ``(K, Y, X, cpg)``, dX ``(N, Hi, Wi, C)``); GPU kernels take no
other layout.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from .. import layouts, memory
from ..kernels import KernelSource, emit_reference
from ..spec import check_binary
from ..layouts import storage_dtype
from .base import BuildInfo, Engine, Timing, as_solution
from .cache import BinaryCache, cache_key

POISON_BYTE = 0xFF
"""dX is filled with 0xFF bytes before every run: NaN in fp32, fp16 and bf16."""


class DeviceMemoryError(MemoryError):
    """The device has not enough free memory for a launch's tensors (message: the bytes
    needed and free)."""


@dataclass
class Loaded:
    source: KernelSource
    func: object
    compile_ms: float
    cache_hit: bool
    resources: dict | None = None


class GpuEngine(Engine):
    """Runs solutions on one GPU through a vendor runtime (see module docstring)."""

    supports_graphs = True
    has_gpu_reference = True

    def __init__(self, runtime, cache: BinaryCache | None = None):
        self.rt = runtime
        self.name = runtime.name
        self.cache = cache or BinaryCache()
        self._loaded = {}
        self._reported = 0

    def take_warnings(self) -> list:
        """The binary cache's warnings not taken before (an unusable directory, a corrupt
        entry removed, a store that failed): data for the caller to show; the engine
        prints nothing. :meth:`time` and :meth:`time_graph` put them in their Timing."""
        new = self.cache.warnings[self._reported:]
        self._reported = len(self.cache.warnings)
        return list(new)

    @property
    def target(self):
        return self.rt.target()

    # ----------------------------------------------------------------- build
    def load(self, source: KernelSource) -> Loaded:
        """Compile (or fetch from the binary cache) and load ``source``. A cache that
        cannot be used costs a compile, never the build (see :meth:`take_warnings`)."""
        if source.sha256 in self._loaded:
            return self._loaded[source.sha256]
        arch = self.target.arch
        opts = self.rt.compile_options(arch)
        key = cache_key(source.text, arch, self.rt.compiler_id(), opts)
        t0 = time.perf_counter()
        binary = self.cache.get(key)
        hit = binary is not None
        if not hit:
            binary = self.rt.compile(source.text, source.name, arch)
            self.cache.put(key, binary)
        ms = (time.perf_counter() - t0) * 1e3
        func = self.rt.load(binary, source.name, source.shared_bytes)
        out = Loaded(source, func, 0.0 if hit else ms, hit, self.rt.function_resources(func))
        self._loaded[source.sha256] = out
        return out

    def _kernel(self, work) -> Loaded:
        """The solution's one kernel, loaded, its binary checked against the spec."""
        sol = as_solution(work)
        k = self.load(sol.kernels[0].source)
        why = check_binary(sol.spec, k.resources)
        if why:
            raise RuntimeError(f"{sol.kernel_name}: {why}")
        return k

    def build(self, work) -> BuildInfo:
        """Compile (or fetch from the cache) and load the solution's kernel and check its
        binary (registers, shared memory) against what the spec assumed."""
        k = self._kernel(work)
        return BuildInfo(k.compile_ms, k.cache_hit, k.resources)

    # ----------------------------------------------------------------- buffers
    def check_device_memory(self, buffers) -> None:
        """The device has room for ``buffers`` (``(name, bytes)`` pairs, each rounded up to
        :data:`~miopen_solver.memory.DEVICE_GRANULE`) beside what is in use now
        (``mem_info``), checked before anything is allocated.

        Raises:
            DeviceMemoryError: naming each buffer, the bytes needed and the bytes free.
        """
        need = memory.device_bytes(*(b for _, b in buffers))
        free, total = self.rt.mem_info()
        if need > free:
            parts = " + ".join(f"{name} {memory.format_bytes(b)}" for name, b in buffers)
            shown_need, shown_free = memory.format_apart(need, free)
            raise DeviceMemoryError(
                f"{self.name} device memory: needs {shown_need} ({parts}), {shown_free} free of "
                f"{memory.format_bytes(total)}; allowed: tensors that fit in the free memory (a smaller -n)")

    @contextmanager
    def _device_tensors(self, dy: np.ndarray, w: np.ndarray, dx_bytes: int, poison: bool = False):
        """dY and W uploaded and a dX buffer of ``dx_bytes`` (NaN-poisoned if asked), as
        device pointers; all three are freed on the way out, also after an error. The free
        device memory is checked first (:meth:`check_device_memory`)."""
        self.check_device_memory((("dY", dy.nbytes), ("W", w.nbytes), ("dX", dx_bytes)))
        ptrs = []
        try:
            for arr in (dy, w):
                ptrs.append(self.rt.alloc(arr.nbytes))
                self.rt.copy_to_device(ptrs[-1], arr)
            ptrs.append(self.rt.alloc(dx_bytes))
            if poison:
                self.rt.memset(ptrs[-1], POISON_BYTE, dx_bytes)
            yield tuple(ptrs)
        finally:
            for ptr in ptrs:
                self.rt.free(ptr)

    @staticmethod
    def _check_layout(spec):
        """GPU kernels read and write NHWC bytes: every tensor NHWC in memory (its flag, or
        one that differs only where dims of length 1 sit: :attr:`ConvProblem.nhwc_memory`)."""
        p = spec.problem
        if not p.nhwc_memory:
            raise ValueError(f"GPU kernels take NHWC tensors; got dX {p.in_layout}, dY {p.out_layout}, "
                             f"W {p.fil_layout}")

    def kernel_args(self, k: Loaded, dy: int, w: int, dx: int) -> tuple:
        """The kernel's arguments: the dY, W and dX pointers, then the bytes of each tensor
        map the source asks for (built once per buffer set, outside any timed region).

        Raises:
            RuntimeError: the source needs tensor maps and the runtime cannot build them.
        """
        if not k.source.tensor_maps:
            return (dy, w, dx)
        build = getattr(self.rt, "tensor_map", None)
        if build is None:
            raise RuntimeError(f"{k.source.name} needs TMA tensor maps, which the {self.name} runtime cannot build")
        ptrs = {"dy": dy, "w": w}
        return (dy, w, dx) + tuple(build(ptrs[d.operand], d) for d in k.source.tensor_maps)

    def _launch(self, k: Loaded, args: tuple, dx_bytes: int):
        if k.source.pre_memset:
            self.rt.memset(args[2], 0, dx_bytes)
        self.rt.launch(k.func, k.source.grid, k.source.block, k.source.shared_bytes, args)

    def launches(self, sol, k: Loaded, dy: int, w: int, dx: int) -> list:
        """``[(args, dx_bytes), ...]``: one launch per chunk of the solution's split-N plan
        (:attr:`Solution.chunks <miopen_solver.solver.Solution.chunks>`; one chunk without a
        split), each the one kernel with dY and dX offset to the chunk's first image (N is
        the outermost dim of NHWC, so a chunk's images are one contiguous run of bytes) and
        the bytes its split-K memset clears; tensor maps (:meth:`kernel_args`) are built per
        chunk over the offset pointers, outside any timed region."""
        p = sol.spec.problem                              # one launch's problem
        eb = p.elem_bytes
        dy_img, dx_img = p.dy_elems // p.N * eb, p.dx_elems // p.N * eb
        return [(self.kernel_args(k, dy + n0 * dy_img, w, dx + n0 * dx_img), n * dx_img) for n0, n in sol.chunks]

    def _run_once(self, k: Loaded, launches: list):
        """One run of the solution: every chunk's launch, in order, on the one stream."""
        for args, nbytes in launches:
            self._launch(k, args, nbytes)

    @staticmethod
    def _upload_views(p, dy: np.ndarray, w: np.ndarray) -> tuple:
        """dY and W as NHWC/KYXC arrays over the caller's bytes (the problem is NHWC in
        memory: :meth:`_check_layout`), so nothing is moved on the host."""
        return layouts.dy_to_nhwc(p, dy), layouts.w_to_kyxc(p, w)

    # ----------------------------------------------------------------- run / time
    def run(self, work, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
        """dX (the problem's ``in_layout``, NHWC in memory; storage type) from one run -- every
        chunk's launch -- into a NaN-poisoned buffer."""
        sol = as_solution(work)
        self._check_layout(sol.spec)
        p = sol.problem
        k = self._kernel(sol)
        dy, w = self._upload_views(p, dy, w)
        out = np.empty((p.N, p.Hi, p.Wi, p.C), dtype=storage_dtype(p.dtype))
        with self._device_tensors(dy, w, out.nbytes, poison=True) as (pdy, pw, pdx):
            self._run_once(k, self.launches(sol, k, pdy, pw, pdx))
            self.rt.synchronize()
            self.rt.copy_to_host(out, pdx)
        return layouts.dx_from_nhwc(p, out)

    def time(self, work, dy: np.ndarray, w: np.ndarray, iters: int, warmup: int = 1) -> Timing:
        """Per-run GPU-event times (ms), a run being every chunk's launch; split-K's dX memset
        is inside the timed region, as MIOpen's kernel time counts every kernel of the invoker."""
        sol = as_solution(work)
        self._check_layout(sol.spec)
        p = sol.problem
        k = self._kernel(sol)
        dy, w = self._upload_views(p, dy, w)
        nbytes = p.dx_elems * p.elem_bytes
        with self._device_tensors(dy, w, nbytes) as (pdy, pw, pdx):
            launches = self.launches(sol, k, pdy, pw, pdx)
            for _ in range(warmup):
                self._run_once(k, launches)
            evs = [self.rt.event() for _ in range(iters + 1)]
            self.rt.record(evs[0])
            for i in range(iters):
                self._run_once(k, launches)
                self.rt.record(evs[i + 1])
            self.rt.synchronize()
            times = [self.rt.elapsed_ms(evs[i], evs[i + 1]) for i in range(iters)]
        return Timing(times, method="events", compile_ms=k.compile_ms, cache_hit=k.cache_hit,
                      warnings=self.take_warnings())

    def time_graph(self, work, dy: np.ndarray, w: np.ndarray, launches: int = 20, replays: int = 15) -> Timing:
        """Per-run time (ms) from replays of a graph of ``launches`` captured runs (each run
        every chunk's launch: one graph holds them all; launch gaps removed, as
        MIOpenDriver's ``--use_hip_graph``); one entry per replay."""
        sol = as_solution(work)
        self._check_layout(sol.spec)
        p = sol.problem
        k = self._kernel(sol)
        dy, w = self._upload_views(p, dy, w)
        nbytes = p.dx_elems * p.elem_bytes
        with self._device_tensors(dy, w, nbytes) as (pdy, pw, pdx):
            chunks = self.launches(sol, k, pdy, pw, pdx)
            self._run_once(k, chunks)
            graph = self.rt.capture(lambda: [self._run_once(k, chunks) for _ in range(launches)])
            self.rt.replay(graph)
            self.rt.synchronize()
            times = []
            for _ in range(replays):
                a, b = self.rt.event(), self.rt.event()
                self.rt.record(a)
                self.rt.replay(graph)
                self.rt.record(b)
                times.append(self.rt.elapsed_ms(a, b) / launches)
        return Timing(times, method="graph", compile_ms=k.compile_ms, cache_hit=k.cache_hit,
                      warnings=self.take_warnings())

    # ----------------------------------------------------------------- reference
    def reference(self, problem, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
        """dX (float32, the problem's ``in_layout``, NHWC in memory) from the naive direct GPU
        kernel (fp32 accumulation, 64-bit offsets: one launch however large the tensors)."""
        src = emit_reference(problem, self.rt.vendor, self.target.arch)
        k = self.load(src)
        dy, w = self._upload_views(problem, dy, w)
        out = np.empty((problem.N, problem.Hi, problem.Wi, problem.C), dtype=np.float32)
        with self._device_tensors(dy, w, out.nbytes, poison=True) as (pdy, pw, pdx):
            self.rt.launch(k.func, src.grid, src.block, 0, (pdy, pw, pdx))
            self.rt.synchronize()
            self.rt.copy_to_host(out, pdx)
        return layouts.dx_from_nhwc(problem, out)
