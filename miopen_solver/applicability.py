"""Is a problem applicable to this solver on a target, and if not, why (MIOpen's IsApplicable).

:func:`is_applicable` returns a :class:`Verdict` that lists **every** reason, each with a
stable code a script can match and a sentence a person can read. Guards run cheap to
specific, as in MIOpen's ``IsApplicable``; the last one (``NO_VALID_CONFIG``) is asked only
when every structural guard passed, because "no config fits" says nothing new about a
problem that is already out of scope.

Policy (decisions, with their sources):

``DIRECTION``
    Only backward data, MIOpenDriver's ``-F 2`` exactly. ``-F`` is a bitmask
    (research miopen.md section 1.4); ``-F 0`` or ``-F 3`` ask for more than backward data.
``TRANSPOSED_MODE``
    ``-m trans``: MIOpen builds transposed-convolution backward data as
    ``Direction::Forward`` (``convolution_api.cpp``, ``transpose_convolutions_x_y_swapping``),
    so it is a forward problem and reported with this code alone.
``DTYPE``
    fp32, fp16, bf16 storage (no int8/fp8/bf8 and no cast types); the target must have a
    matrix atom for the type.
``TF32``
    A problem with TF32 math (``ConvProblem.tf32``, MIOpenDriver ``-M 0`` on fp32) needs a TF32
    matrix instruction on the target (:func:`miopen_solver.tf32.target_reason`: none on gfx90a
    and gfx950). The driver never sends one there: MIOpen falls back to fp32 kernels on such
    devices, and so does :func:`miopen_solver.tf32.resolve`, with a note; a library caller who
    asks the solver directly gets this reason.
``LAYOUT``
    Every tensor must be NHWC or NCHW in memory, in any combination (all-NCHW, MIOpen's
    default, and the mixed lines of MIOpen's perf-model files alike), on every target. The
    kernel reads and writes NHWC; a tensor stored NCHW goes through a batched transpose
    into a device workspace (dY and W before the kernel, dX after it), as MIOpen's NHWC
    solvers run NCHW problems (:mod:`miopen_solver.transpose`; the workspace is
    :meth:`~miopen_solver.solver.DgradSolver.get_workspace_size`). What counts is the bytes
    (:meth:`ConvProblem.stored_as`), not the flag: a tensor whose dims longer than 1 come in
    NHWC's order *is* NHWC and needs no transform (a 1x1 filter in NCHW is KYXC; a C=1 or
    H=W=1 tensor is both), as MIOpen's ``IsPossibleLayout`` with ``IgnoreDegenerateStrides``
    finds (rocm-libraries ``projects/miopen/src/tensor.cpp``, 0c3ff24a). Other orders (CHWN
    with N, C and H*W > 1) are applicable nowhere.
``SPATIAL_DIM``
    2-D only (the tilde decomposition and kernel are 2-D).
``INDEX_OVERFLOW``
    Every tensor *one launch* sees must stay below 2^31 elements and
    :data:`TENSOR_BYTES_LIMIT` (2^31-1) bytes: kernels index with 32-bit signed integers and
    AMD buffer resources hold 32-bit byte sizes (MIOpen's CK solvers require each tensor
    < 2 GB the same way). dY and dX grow with N, so a problem past the limit is split
    along N (:func:`batch_chunks`: equal chunks of images, each a launch of the same
    kernel with pointer offsets into the whole buffers) and stays applicable; only a
    problem whose single image (or W, which no split shrinks) is past it is refused.
    So must every coordinate the kernels form:
    per axis, rows and columns of dX/dY (with pads, strides, dilations and the tilde
    halo) stay within ``2*(Hi + 2*pH) + sH`` in magnitude, which must be <= 2^31-1 (a
    pad, stride or dilation near 2^31 overflows although each value fits an ``int``);
    and the largest sub-GEMM's GemmM = N*HTildeSlice*WTildeSlice (its phase's rows actually
    written, at most N*Hi*Wi) plus a tile's rows must too (per launch: split-N divides it
    as well). The parser already refuses any flag outside a C ``int``, as MIOpenDriver reads
    them. Like the tensor sizes, these hold for every target (the ``cpu`` target runs
    the GPU kernels' decomposition). Each finding of the reason names the MIOpenDriver
    flags behind it (:data:`OVERFLOW_FLAGS`; a coordinate with each flag's value) and the
    limit it passes, 2^31-1.
``TOO_MANY_SUB_GEMMS``
    More than :data:`~miopen_solver.tilde.MAX_SUB_GEMMS` (862) tilde sub-GEMMs: the kernel
    keeps one 76-byte record per sub-GEMM in 64 KiB of constant memory. There is one per pair
    of a row phase and a column phase that each write a dX row (at most ``min(YTilde, Y, Hi)
    * min(XTilde, X, Wi)``, YTilde = sH/gcd(sH, dH)), counted in O(log)
    (:func:`~miopen_solver.tilde.too_many_sub_gemms`), so a huge stride with a small filter
    stays applicable (``-u 100000 -y 3``: 3 row phases), as does a tiny image with a huge
    stride and filter (``-H 2 -y 1000 -u 999``: 2 of 999 row phases write), and only large
    strides *and* large filters over large enough images are refused (e.g. 31x31 with stride
    31 and pad 1 on 62x62). The ``cpu`` target runs the same decomposition and takes the same limit. A problem the
    patch GEMM serves (stride = filter, no padding: ViT-B/32's 32x32 embedding) is not refused:
    that family is one dense GEMM with no sub-GEMM table, and it is then the only family
    offered with the NCHW pointwise schedules, the same dense GEMM on NCHW lines
    (:func:`~miopen_solver.heuristics.heuristic_config`, ``search``).
``NO_VALID_CONFIG``
    Neither the default heuristic nor its fallbacks validate
    (:func:`miopen_solver.heuristics.default_performance_config`); the sentence carries the
    validator's reasons.

Notes (``Verdict.notes``) describe an applicable problem without blocking it:

``DEPTHWISE``
    ``G > 1`` with ``cpg == kpg == 1`` **is applicable** (like MIOpen's CK solver 155; rocKE
    rejects it). Where the default config is a GEMM schedule it runs as correct GEMMs with
    GemmN = 1, so most of each MMA's columns are masked work: slow, not wrong. Where the
    default is the direct schedule (:mod:`miopen_solver.direct`; NVIDIA targets) there is no
    note.

There is no ``ALIGNMENT`` reason: vector widths are caps that clamp down to 1 element
(:mod:`miopen_solver.vectors`), so no channel count or tensor shape is refused for
alignment. Buffer pointer alignment is the runtime's (allocations are 256-byte aligned).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .command import describe_directions
from .errors import PerfConfigError
from .patch import patch_reason
from .transpose import memory_order, native_problem
from .problem import DTYPE_BYTES, ConvProblem
from .heuristics import default_performance_config
from .target import Target
from .tf32 import target_reason
from .tilde import axes, rows_per_image, too_many_sub_gemms

DIRECTION = "DIRECTION"
TRANSPOSED_MODE = "TRANSPOSED_MODE"
DTYPE = "DTYPE"
TF32 = "TF32"
LAYOUT = "LAYOUT"
SPATIAL_DIM = "SPATIAL_DIM"
INDEX_OVERFLOW = "INDEX_OVERFLOW"
TOO_MANY_SUB_GEMMS = "TOO_MANY_SUB_GEMMS"
NO_VALID_CONFIG = "NO_VALID_CONFIG"
DEPTHWISE = "DEPTHWISE"

REASON_CODES = (DIRECTION, TRANSPOSED_MODE, DTYPE, TF32, LAYOUT, SPATIAL_DIM, INDEX_OVERFLOW,
                TOO_MANY_SUB_GEMMS, NO_VALID_CONFIG)
"""Every code a :class:`Reason` may carry (stable; scripts may match on them)."""
NOTE_CODES = (DEPTHWISE,)
"""Every code a note may carry."""

SUPPORTED_DTYPES = ("fp32", "fp16", "bf16")
INDEX_LIMIT = 2**31 - 1
"""Largest element count of one launch's tensor and largest coordinate (32-bit signed
indexing)."""
TENSOR_BYTES_LIMIT = 2**31 - 1
"""Largest byte size of a tensor one launch addresses (32-bit offsets, AMD buffer-resource
sizes). Past it the batch is split (:func:`batch_chunks`). A module constant so tests can
force a split on a small problem (``monkeypatch.setattr(applicability, "TENSOR_BYTES_LIMIT", ...)``);
the solver reads it when it decides, and the plan travels in the Solution."""
BACKWARD_DATA = 2
"""MIOpenDriver's ``-F`` value for backward data."""


@dataclass(frozen=True)
class Reason:
    """One finding: a stable ``code`` (see :data:`REASON_CODES`) and a sentence."""

    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def as_dict(self) -> dict:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True)
class Verdict:
    """The answer to "is this problem applicable?".

    Attributes:
        ok: True when no reason was found.
        reasons: every reason the problem is not applicable, in guard order.
        notes: findings that do not block (e.g. ``DEPTHWISE``).
    """

    ok: bool
    reasons: tuple = ()
    notes: tuple = ()

    def __bool__(self) -> bool:
        return self.ok

    @property
    def codes(self) -> tuple:
        """The reasons' codes, in order."""
        return tuple(r.code for r in self.reasons)

    def as_dict(self) -> dict:
        """Plain data (JSON-ready): ``applicable``, ``reasons`` and ``notes``."""
        return {"applicable": self.ok,
                "reasons": [r.as_dict() for r in self.reasons],
                "notes": [n.as_dict() for n in self.notes]}


class NotApplicableError(ValueError):
    """Raised where an applicable problem is required; carries the :class:`Verdict`."""

    def __init__(self, verdict: Verdict):
        self.verdict = verdict
        super().__init__("not applicable: " + "; ".join(str(r) for r in verdict.reasons))


def _layout_reason(problem: ConvProblem) -> Reason | None:
    if problem.is_3d:   # refused by SPATIAL_DIM; its layout counts only when mixed or CHWN-like
        if problem.stored_as("NDHWC") or problem.stored_as("NCDHW"):
            return None
        return Reason(LAYOUT, f"dX {problem.in_layout}, W {problem.fil_layout}, dY {problem.out_layout}: "
                              f"a 3-D problem must be all-NDHWC or all-NCDHW")
    lay = {"dX (in_layout)": ("dX", problem.in_layout), "W (fil_layout)": ("W", problem.fil_layout),
           "dY (out_layout)": ("dY", problem.out_layout)}
    bad = [f"{label} {flag}" for label, (tensor, flag) in lay.items() if memory_order(problem, tensor) is None]
    if not bad:
        return None
    return Reason(LAYOUT, f"{', '.join(bad)}: every tensor must be NCHW or NHWC in memory (in any "
                          f"combination; NCHW runs through transposes in a workspace); other orders are "
                          f"applicable on no target")


GEMM_M_HEADROOM = 1024
"""Rows past GemmM a tile may address (tile_m and TMA boxes are at most 256 rows)."""


def images_per_launch(problem: ConvProblem) -> int:
    """The most images (N) one launch may take: dY and dX of that many images within
    :data:`TENSOR_BYTES_LIMIT` bytes and :data:`INDEX_LIMIT` elements, and the largest
    sub-GEMM's GemmM (N times its phase's rows actually written,
    :func:`~miopen_solver.tilde.rows_per_image`) plus a tile's rows within
    :data:`INDEX_LIMIT`; at least ``problem.N`` is not promised (0 when not even one image
    fits). O(sub-GEMMs)."""
    eb = DTYPE_BYTES.get(problem.dtype, 4)
    per_dy, per_dx = problem.dy_elems // problem.N, problem.dx_elems // problem.N
    most = min(TENSOR_BYTES_LIMIT // max(1, per_dy * eb), TENSOR_BYTES_LIMIT // max(1, per_dx * eb),
               INDEX_LIMIT // max(1, per_dy), INDEX_LIMIT // max(1, per_dx))
    if not problem.is_3d:
        rows, cols = rows_per_image(*axes(problem))
        most = min(most, max(0, INDEX_LIMIT - GEMM_M_HEADROOM) // max(1, rows * cols))
    return most


@lru_cache(maxsize=4096)
def _largest_divisor_at_most(n: int, most: int) -> int:
    """The largest divisor of ``n`` that is <= ``most`` (>= 1), in O(min(most, sqrt(n))):
    counting down from ``most`` where ``most <= sqrt(n)``, else through the divisor pairs
    ``(d, n // d)`` with ``d <= sqrt(n)``."""
    if most * most <= n:
        return next(q for q in range(most, 0, -1) if n % q == 0)
    best, d = 1, 1
    while d * d <= n:
        if n % d == 0:
            for q in (d, n // d):
                if q <= most and q > best:
                    best = q
        d += 1
    return best


MAX_SPLIT_LAUNCHES = 65536
"""Launches a split-N plan may take at most: equal chunks must divide N, so an N whose
divisors that fit one launch are all small (a prime past the limit: one image a launch) would
otherwise take up to N launches (and as many plan entries)."""


def chunk_images(problem: ConvProblem) -> int:
    """Images per launch of the split-N plan (:func:`batch_chunks`): N when the whole batch
    fits one launch (:func:`images_per_launch`) or when not even one image fits (then the
    problem is not applicable: ``INDEX_OVERFLOW``); else the largest divisor of N that fits,
    so every chunk is the same problem and one kernel, emitted once, serves them all (a
    prime N past the limit runs one image per launch). O(sqrt(N)) once per (N, fit)."""
    most = images_per_launch(problem)
    if most >= problem.N or most < 1:
        return problem.N
    return _largest_divisor_at_most(problem.N, most)


def batch_chunks(problem: ConvProblem) -> tuple:
    """The split-N plan: ``((n0, n), ...)``, equal chunks of ``n =``
    :func:`chunk_images` images covering ``0..N-1`` once each, in order; ``((0, N),)``
    without a split. (Materialises N/n pairs: the solver itself asks :func:`chunk_images`.)"""
    n = chunk_images(problem)
    return tuple((n0, n) for n0 in range(0, problem.N, n))


def launch_problem(problem: ConvProblem) -> ConvProblem:
    """The problem one kernel launch computes: ``problem`` with N cut to
    :func:`chunk_images`, in its own layouts (the NCHW pointwise schedules read NCHW dY and
    dX in place; every other schedule's spec holds
    :func:`~miopen_solver.transpose.native_problem`, dY and W NHWC, and NCHW tensors are
    transposed around the launch: see :mod:`miopen_solver.transpose`). Configs, specs and
    kernels are those of this problem; the perf-db key stays the whole problem's."""
    n = chunk_images(problem)
    return problem if n == problem.N else problem.replace(N=n)


OVERFLOW_FLAGS = {
    "dY": ("K*Ho*Wo", "-k, -H/-W, -y/-x, -p/-q, -u/-v, -l/-j"),
    "W": ("K*(C/G)*Y*X", "-k, -c, -g, -y/-x"),
    "dX": ("C*Hi*Wi", "-c, -H/-W"),
    "GemmM": ("", "-H/-W, -y/-x, -p/-q, -u/-v, -l/-j"),
}
"""The MIOpenDriver flags behind each quantity an ``INDEX_OVERFLOW`` reason names, with the
product that counts a tensor's elements (2-D; :data:`OVERFLOW_FLAGS_3D` adds the depth)."""
OVERFLOW_FLAGS_3D = {
    "dY": ("K*Do*Ho*Wo", "-k, -!/-H/-W, -@/-y/-x, -$/-p/-q, -#/-u/-v, -^/-l/-j"),
    "W": ("K*(C/G)*Z*Y*X", "-k, -c, -g, -@/-y/-x"),
    "dX": ("C*Di*Hi*Wi", "-c, -!/-H/-W"),
}


def _limit_text(limit: int, unit: str = "") -> str:
    """``2147483647 bytes (2^31-1)``, or the number alone for a limit a test has lowered."""
    return f"{limit}{' ' + unit if unit else ''}" + (" (2^31-1)" if limit == 2**31 - 1 else "")


def _overflow_reason(problem: ConvProblem) -> Reason | None:
    """``INDEX_OVERFLOW`` when one launch's tensors or the kernels' coordinates would pass
    32-bit indexing, whatever the split along N: each finding names the MIOpenDriver flags
    behind it (:data:`OVERFLOW_FLAGS`) and its value, and the reason the limit it passes."""
    eb = DTYPE_BYTES.get(problem.dtype, 4)
    one = problem.replace(N=1)
    flags = {**OVERFLOW_FLAGS, **(OVERFLOW_FLAGS_3D if problem.is_3d else {})}
    tensors = (("dY", one.dy_elems), ("W", problem.w_elems), ("dX", one.dx_elems))
    bad = [f"{name}{'' if name == 'W' else ' of one image'} is {n * eb} bytes ({n} elements: {flags[name][0]}, "
           f"from {flags[name][1]})"
           for name, n in tensors if n * eb > TENSOR_BYTES_LIMIT or n > INDEX_LIMIT]
    parts = ["; ".join(bad) + f": past {_limit_text(TENSOR_BYTES_LIMIT, 'bytes')}, the limit of 32-bit indexing "
             "(element offsets and AMD buffer-resource byte sizes), which no split along N helps; allowed: "
             f"values of those flags that keep each at most {TENSOR_BYTES_LIMIT} bytes"] if bad else []
    if not problem.is_3d:
        h, w = axes(problem)
        bad = [f"coordinates reach {formula} = {2 * (a.size_in + 2 * a.pad) + a.stride} "
               f"({size} {a.size_in} from {flag[0]}, {pad} {a.pad} from {flag[1]}, {stride} {a.stride} from {flag[2]})"
               for a, formula, (size, pad, stride), flag in (
                   (h, "2*(Hi + 2*pH) + sH", ("Hi", "pH", "sH"), ("-H", "-p", "-u")),
                   (w, "2*(Wi + 2*pW) + sW", ("Wi", "pW", "sW"), ("-W", "-q", "-v")))
               if 2 * (a.size_in + 2 * a.pad) + a.stride > INDEX_LIMIT]
        rows, cols = rows_per_image(h, w)
        gemm_m = rows * cols
        if gemm_m + GEMM_M_HEADROOM > INDEX_LIMIT:
            bad.append(f"GemmM of one image = HTildeSlice*WTildeSlice = {rows}*{cols} = {gemm_m} "
                       f"(+{GEMM_M_HEADROOM} rows of a tile), from {flags['GemmM'][1]}")
        if bad:
            parts.append("; ".join(bad) + f": past {_limit_text(INDEX_LIMIT)}, the limit of the kernels' 32-bit "
                         f"int arithmetic; allowed: values of those flags that keep each at most {INDEX_LIMIT}")
    if not parts:
        n = chunk_images(problem)
        launches = problem.N // n
        if launches > MAX_SPLIT_LAUNCHES:
            parts.append(f"the split along N would take {launches} launches of {n} image(s) (the largest "
                         f"divisor of N = {problem.N} within the {images_per_launch(problem)} images one launch "
                         f"holds); allowed: at most {MAX_SPLIT_LAUNCHES} launches, an N (-n) with a larger divisor "
                         f"that fits one launch")
    return Reason(INDEX_OVERFLOW, "; ".join(parts)) if parts else None


def check(problem: ConvProblem, target: Target, *, forw: int = BACKWARD_DATA) -> Verdict:
    """The structural guards only (everything but ``NO_VALID_CONFIG``); see
    :func:`is_applicable` for the arguments."""
    if isinstance(forw, bool) or not isinstance(forw, int):
        raise TypeError(f"forw {forw!r}: allowed: an int, MIOpenDriver's -F bitmask (2: backward data)")
    reasons = []
    if problem.mode == "trans":
        reasons.append(Reason(TRANSPOSED_MODE,
                              "transposed convolution (-m trans) backward data is a forward "
                              "convolution in MIOpen (Direction::Forward); this solver is backward data only"))
    if forw != BACKWARD_DATA:
        reasons.append(Reason(DIRECTION, f"-F {forw} asks for {describe_directions(forw)}; "
                                         f"this solver answers backward data only (-F 2)"))
    if problem.dtype not in SUPPORTED_DTYPES:
        reasons.append(Reason(DTYPE, f"{problem.dtype} is not supported; "
                                     f"supported: {', '.join(SUPPORTED_DTYPES)}"))
    elif not target.atoms_for(problem.dtype):
        reasons.append(Reason(DTYPE, f"{target.arch} has no matrix atom for {problem.dtype}"))
    elif problem.tf32 and target_reason(target) is not None:
        reasons.append(Reason(TF32, f"{target_reason(target)}; MIOpen runs fp32 there (math type "
                                    f"falls back): ask for IEEE fp32 (tf32=False, MIOpenDriver -M 1)"))
    layout = _layout_reason(problem)
    if layout:
        reasons.append(layout)
    if problem.spatial_dim != 2:
        reasons.append(Reason(SPATIAL_DIM, f"{problem.spatial_dim}-D convolution; this solver is 2-D only"))
    overflow = _overflow_reason(problem)
    if overflow:
        reasons.append(overflow)
    if not problem.is_3d:
        too_many = too_many_sub_gemms(*axes(problem))
        if too_many and patch_reason(native_problem(problem), target) is not None:
            reasons.append(Reason(TOO_MANY_SUB_GEMMS, too_many))   # the patch GEMM has no sub-GEMM table
    notes = ()
    if problem.is_depthwise:
        notes = (Reason(DEPTHWISE, f"depthwise (G={problem.G}, cpg=kpg=1) runs as GEMMs with "
                                   f"GemmN=1 on {target.arch}: correct, but most MMA columns are masked work"),)
    return Verdict(not reasons, tuple(reasons), notes)


def is_applicable(problem: ConvProblem, target: Target, *, forw: int = BACKWARD_DATA) -> Verdict:
    """MIOpen's IsApplicable, with every reason.

    Args:
        problem: the convolution as parsed from an MIOpenDriver line.
        target: the device architecture (:func:`miopen_solver.target.get_target`).
        forw: MIOpenDriver's ``-F`` bitmask the line carried (ConvProblem does not hold the
            direction; the parser rejects anything but 2 unless asked not to).

    Returns:
        A :class:`Verdict`; ``ok`` iff ``reasons`` is empty. Never raises for a valid
        :class:`ConvProblem` and :class:`Target` and an int ``forw``.

    Raises:
        TypeError: ``forw`` is not an int.
    """
    verdict = check(problem, target, forw=forw)
    if not verdict.ok:
        return verdict
    try:
        default = default_performance_config(launch_problem(problem), target)
    except PerfConfigError as e:
        return Verdict(False, (Reason(NO_VALID_CONFIG, str(e)),), verdict.notes)
    if default.schedule.direct:      # the note is about GEMMs: the default is not one
        return Verdict(True, (), tuple(n for n in verdict.notes if n.code != DEPTHWISE))
    return verdict
