"""The GPU engine: emit -> compile (cached) -> load -> launch, on any vendor runtime.

A vendor runtime (:class:`~miopen_solver.runtime.cuda.CudaRuntime`,
:class:`~miopen_solver.runtime.hip.HipRuntime`) supplies compile/load/alloc/copy/launch/
events/graphs; this module holds everything that is the same for both. The dgrad kernels
read NHWC (dY ``(N, Ho, Wo, K)``, W ``(K, Y, X, cpg)``) and write dX ``(N, Hi, Wi, C)``, or
dX NCHW where the kernel stores it so (:func:`~miopen_solver.transpose.writes_nchw_dx`); a
tensor the caller holds NCHW is uploaded as it is and transposed on the device, through
the solution's workspace (:mod:`miopen_solver.transpose`). Split-K through the workspace
(:mod:`miopen_solver.splitk`) launches the reduction kernel after each chunk's dgrad kernel,
which writes its partial sums into the workspace's slices instead of dX.

A run's launches after its first follow a kernel of the same run on the same stream. On a
runtime with programmatic dependent launch (CUDA, sm_90+) each of them that no memset
precedes is launched to overlap that kernel: its blocks may be scheduled while the previous
grid finishes, and its first statement (``griddepcontrol.wait`` in every kernel source) holds
them until that grid has completed and its writes are visible (CUDA Programming Guide,
"Programmatic Dependent Launch and Synchronization"). The first launch of a run is a plain
one, so a run never overlaps what the stream ran before it.
"""

from __future__ import annotations

import dataclasses
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from .. import layouts, memory
from ..kernels import KernelSource, emit_reference
from ..spec import check_binary
from ..layouts import storage_dtype
from .base import BuildInfo, Engine, Timing, as_solution, check_count
from .cache import BinaryCache, cache_key

POISON_BYTE = 0xFF
"""dX is filled with 0xFF bytes before every run: NaN in fp32, fp16 and bf16."""
PDL_ENV = "MIOPEN_DGRAD_PDL"
"""Environment variable: an off word (:data:`PDL_OFF`) launches every step of a run plainly,
without programmatic dependent launch (for comparisons); unset, empty or an on word
(:data:`PDL_ON`) overlaps where the runtime can; any other value is an error
(:func:`pdl_from_env`)."""
PDL_OFF = ("0", "no", "false", "off", "disable", "disabled")
PDL_ON = ("1", "yes", "true", "on", "enable", "enabled")


def pdl_from_env(environ=None) -> bool:
    """Whether :data:`PDL_ENV` (in ``environ``, default ``os.environ``) leaves overlapped
    launches on: unset, empty or one of :data:`PDL_ON` (any case) is on, :data:`PDL_OFF` off.

    Raises:
        ValueError: any other value, naming the variable, the value and what is allowed.
    """
    value = (os.environ if environ is None else environ).get(PDL_ENV)
    v = "" if value is None else value.strip().lower()
    if v in ("",) + PDL_ON:
        return True
    if v in PDL_OFF:
        return False
    raise ValueError(f"{PDL_ENV} {value!r}: allowed: {', '.join(PDL_ON)} (on) or {', '.join(PDL_OFF)} (off)")


class DeviceMemoryError(MemoryError):
    """The device has not enough free memory for a launch's tensors (message: the bytes
    needed and free)."""


@dataclass(frozen=True)
class _Step:
    """One launch of a run: a loaded kernel, its geometry and arguments; ``memset_bytes`` of
    dX (``args[2]``) zeroed before it (split-K), and ``cleared`` ``(pointer, bytes)``
    zeroed too (stream-K's flags); ``after``: a transform after the kernel; ``overlap``: it
    follows a kernel of the same run with no memset between, so it may be launched to
    overlap that kernel (programmatic dependent launch, :meth:`GpuEngine.launches`)."""

    kernel: "Loaded"
    grid: tuple
    block: tuple
    shared: int
    args: tuple
    memset_bytes: int = 0
    after: bool = False
    cleared: tuple = ()
    overlap: bool = False


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

    def __init__(self, runtime, cache: BinaryCache | None = None, pdl: bool | None = None):
        """``pdl``: launch a run's later steps to overlap the step before them (programmatic
        dependent launch) where the runtime can (``programmatic_launch``: sm_90+); None reads
        :data:`PDL_ENV` (:func:`pdl_from_env`).

        Raises:
            ValueError: ``pdl`` None and a value of :data:`PDL_ENV` that is neither on nor off."""
        self.rt = runtime
        self.name = runtime.name
        self.cache = cache or BinaryCache()
        self._loaded = {}
        self._reported = 0
        if pdl is None:
            pdl = pdl_from_env()
        self.pdl = bool(pdl) and bool(getattr(runtime, "programmatic_launch", False))

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
    def _device_tensors(self, dy: np.ndarray, w: np.ndarray, dx_bytes: int, poison: bool = False,
                        workspace: int = 0, poison_ranges=()):
        """dY and W uploaded (their bytes as given), a dX buffer of ``dx_bytes`` (NaN-poisoned
        if asked) and a workspace of ``workspace`` bytes (0: none; its ``poison_ranges``
        ``(offset, bytes)`` poisoned too), as device pointers ``(dy, w, dx, workspace or
        0)``; all are freed on the way out, also after an error. The free device memory is
        checked first (:meth:`check_device_memory`)."""
        bufs = (("dY", dy.nbytes), ("W", w.nbytes), ("dX", dx_bytes)) + ((("workspace", workspace),) if workspace else ())
        self.check_device_memory(bufs)
        ptrs = []
        try:
            for arr in (dy, w):
                ptrs.append(self.rt.alloc(arr.nbytes))
                self.rt.copy_to_device(ptrs[-1], np.ascontiguousarray(arr))
            ptrs.append(self.rt.alloc(dx_bytes))
            if poison:
                self.rt.memset(ptrs[-1], POISON_BYTE, dx_bytes)
            ws = self.rt.alloc(workspace) if workspace else 0
            if ws:
                ptrs.append(ws)
                for offset, nbytes in poison_ranges if poison else ():
                    self.rt.memset(ws + offset, POISON_BYTE, nbytes)
            yield (ptrs[0], ptrs[1], ptrs[2], ws)
        finally:
            for ptr in ptrs:
                self.rt.free(ptr)

    def kernel_args(self, k: Loaded, dy: int, w: int, dx: int, own_workspace: int = 0) -> tuple:
        """The kernel's arguments: the dY, W and dX pointers, the kernel's own workspace
        (``own_workspace``) when the source takes one (``workspace_arg``), then the bytes of
        each tensor map the source asks for (built once per buffer set, outside any timed
        region).

        Raises:
            RuntimeError: the source needs tensor maps and the runtime cannot build them.
        """
        ptrs = (dy, w, dx) + ((own_workspace,) if k.source.workspace_arg else ())
        if not k.source.tensor_maps:
            return ptrs
        build = getattr(self.rt, "tensor_map", None)
        if build is None:
            raise RuntimeError(f"{k.source.name} needs TMA tensor maps, which the {self.name} runtime cannot build")
        bufs = {"dy": dy, "w": w}
        return ptrs + tuple(build(bufs[d.operand], d) for d in k.source.tensor_maps)

    def launches(self, sol, k: Loaded, dy: int, w: int, dx: int, workspace: int = 0) -> list:
        """One run of the solution as ``[_Step, ...]``, in order: the layout transforms
        before the kernel (user dY/W bytes -> their NHWC copies in the workspace; both in one
        launch, :attr:`Solution.transform_launches <miopen_solver.solver.Solution.transform_launches>`), one launch
        of the kernel per chunk of the split-N plan (:attr:`Solution.chunks
        <miopen_solver.solver.Solution.chunks>`; one without a split), each with dY and dX
        offset to the chunk's first image (N is the outermost dim of NHWC, so a chunk's
        images are one contiguous run of bytes, in NHWC and NCHW alike) and the bytes its
        split-K memset clears -- with split-K through the workspace the kernel gets the
        workspace's slices instead of dX and the reduction follows it, from the slices into
        the chunk's dX -- then the transform after it (the NHWC dX copy -> the user's dX),
        if any: a kernel that stores dX NCHW gets the user's dX pointer. Tensor maps
        (:meth:`kernel_args`) are built per chunk over the offset pointers, outside any timed
        region."""
        p = sol.spec.problem                              # one launch's problem
        eb = p.elem_bytes
        user = {"dY": dy, "W": w, "dX": dx}
        native = dict(user)
        for t in sol.transforms:
            native[t.tensor] = workspace + t.offset
        steps = []
        for launch in sol.transform_launches:
            ptrs = [(user[t.tensor], native[t.tensor]) if t.before else (native[t.tensor], user[t.tensor])
                    for t in launch.transforms]
            steps.append(_Step(self._transform_kernel(launch), launch.grid, launch.block, 0, launch.args(ptrs),
                               after=not launch.before))
        dy_img, dx_img = p.dy_elems // p.N * eb, p.dx_elems // p.N * eb
        red = sol.reduce
        main = []
        own = workspace + sol.kernel_workspace_offset if k.source.workspace_arg else 0
        for n0, n in sol.chunks:
            out = workspace + red.offset if red else native["dX"] + n0 * dx_img
            main.append(_Step(k, k.source.grid, k.source.block, k.source.shared_bytes,
                              self.kernel_args(k, native["dY"] + n0 * dy_img, native["W"], out, own),
                              memset_bytes=n * dx_img if k.source.pre_memset else 0,
                              cleared=((own, k.source.workspace_cleared),) if k.source.workspace_cleared else ()))
            if red:
                rk = self.load(red.emit(self.rt.vendor, self.target.arch))
                main.append(_Step(rk, red.grid, red.block, 0, red.args(out, native["dX"] + n0 * dx_img)))
        ordered = [s for s in steps if not s.after] + main + [s for s in steps if s.after]
        return [dataclasses.replace(s, overlap=i > 0 and not s.memset_bytes and not s.cleared)
                for i, s in enumerate(ordered)]

    def _transform_kernel(self, launch) -> Loaded:
        return self.load(launch.emit(self.rt.vendor, self.target.arch))

    def _run_once(self, steps: list):
        """One run of the solution: every step, in order, on the one stream; a step marked
        ``overlap`` launched to overlap the kernel before it when :attr:`pdl` is on. The first
        step always waits for whatever the stream ran before the run."""
        for st in steps:
            if st.memset_bytes:
                self.rt.memset(st.args[2], 0, st.memset_bytes)
            for ptr, nbytes in st.cleared:
                self.rt.memset(ptr, 0, nbytes)
            launch = self.rt.launch_dependent if st.overlap and self.pdl else self.rt.launch
            launch(st.kernel.func, st.grid, st.block, st.shared, st.args)

    @staticmethod
    def _poison_ranges(sol) -> tuple:
        """Workspace ranges the kernel writes (the NHWC dX copy, the split-K slices,
        stream-K's partial-sum slots), poisoned with dX: an element the reduction or a
        stream-K owner reads and no block wrote is NaN."""
        slices = ((sol.reduce.offset, sol.reduce.nbytes),) if sol.reduce else ()
        if getattr(sol.spec, "stream_k", False):       # the slots after the flags (those are cleared)
            src = sol.kernels[0].source
            slices = ((sol.kernel_workspace_offset + src.workspace_cleared, src.workspace_arg - src.workspace_cleared),)
        return tuple((t.offset, t.nbytes) for t in sol.transforms if not t.before) + slices

    # ----------------------------------------------------------------- run / time
    def run(self, work, dy: np.ndarray, w: np.ndarray, graph_runs: int = 0) -> np.ndarray:
        """dX (the problem's ``in_layout``; storage type) from one run -- the layout
        transforms and every chunk's launch -- into a NaN-poisoned buffer (and workspace).
        ``graph_runs`` > 0: from one replay of a graph of that many captured runs instead (as
        :meth:`time_graph` times them, overlapped launches included); every run writes the
        same dX, so an element a graph run misses, or a race between its launches changes,
        is caught as in a plain run."""
        sol = as_solution(work)
        p = sol.problem
        layouts.check_inputs(p, dy, w)
        k = self._kernel(sol)
        out = np.empty(layouts.dx_shape(p), dtype=storage_dtype(p.dtype))
        with self._device_tensors(dy, w, out.nbytes, poison=True, workspace=sol.workspace_bytes,
                                  poison_ranges=self._poison_ranges(sol)) as (pdy, pw, pdx, pws):
            steps = self.launches(sol, k, pdy, pw, pdx, pws)
            if graph_runs > 0:
                self.rt.replay(self.rt.capture(lambda: [self._run_once(steps) for _ in range(graph_runs)]))
            else:
                self._run_once(steps)
            self.rt.synchronize()
            self.rt.copy_to_host(out, pdx)
        return out

    def time(self, work, dy: np.ndarray, w: np.ndarray, iters: int, warmup: int = 1) -> Timing:
        """Per-run GPU-event times (ms), a run being every step of :meth:`launches`: the
        layout transforms and split-K's dX memset are inside the timed region, as MIOpen's
        kernel time counts every kernel of the invoker."""
        sol = as_solution(work)
        iters, warmup = check_count("iters", iters, 1), check_count("warmup", warmup, 0)
        p = sol.problem
        k = self._kernel(sol)
        nbytes = p.dx_elems * p.elem_bytes
        with self._device_tensors(dy, w, nbytes, workspace=sol.workspace_bytes) as (pdy, pw, pdx, pws):
            steps = self.launches(sol, k, pdy, pw, pdx, pws)
            for _ in range(warmup):
                self._run_once(steps)
            evs = [self.rt.event() for _ in range(iters + 1)]
            self.rt.record(evs[0])
            for i in range(iters):
                self._run_once(steps)
                self.rt.record(evs[i + 1])
            self.rt.synchronize()
            times = [self.rt.elapsed_ms(evs[i], evs[i + 1]) for i in range(iters)]
        return Timing(times, method="events", compile_ms=k.compile_ms, cache_hit=k.cache_hit,
                      warnings=self.take_warnings())

    def time_graph(self, work, dy: np.ndarray, w: np.ndarray, launches: int = 20, replays: int = 15) -> Timing:
        """Per-run time (ms) from replays of a graph of ``launches`` captured runs (each run
        every step of :meth:`launches`: one graph holds them all; launch gaps removed, as
        MIOpenDriver's ``--use_hip_graph``); one entry per replay."""
        sol = as_solution(work)
        launches, replays = check_count("launches", launches, 1), check_count("replays", replays, 1)
        p = sol.problem
        k = self._kernel(sol)
        nbytes = p.dx_elems * p.elem_bytes
        with self._device_tensors(dy, w, nbytes, workspace=sol.workspace_bytes) as (pdy, pw, pdx, pws):
            steps = self.launches(sol, k, pdy, pw, pdx, pws)
            self._run_once(steps)
            graph = self.rt.capture(lambda: [self._run_once(steps) for _ in range(launches)])
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
        dy, w = layouts.dy_to_nhwc(problem, dy), layouts.w_to_kyxc(problem, w)   # host copies where NCHW
        out = np.empty((problem.N, problem.Hi, problem.Wi, problem.C), dtype=np.float32)
        with self._device_tensors(dy, w, out.nbytes, poison=True) as (pdy, pw, pdx, _):
            self.rt.launch(k.func, src.grid, src.block, 0, (pdy, pw, pdx))
            self.rt.synchronize()
            self.rt.copy_to_host(out, pdx)
        return layouts.dx_from_nhwc(problem, out)
