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
``LAYOUT``
    GPU targets read NHWC natively: all three tensors NHWC (dX NHWC, W KYXC, dY NHWK) is
    the only applicable case; NCHW would need transpose kernels and a workspace, which
    this solver does not have (MIOpen's CK solver 155 does, via its workspace). The ``cpu``
    target accepts all-NHWC and all-NCHW (the numpy engine handles both). Mixed layouts
    (and CHWN) are applicable nowhere.
``SPATIAL_DIM``
    2-D only (the tilde decomposition and kernel are 2-D).
``INDEX_OVERFLOW``
    Every tensor must stay below 2^31 elements and 2^31 bytes: kernels index with 32-bit
    signed integers and AMD buffer resources hold 32-bit byte sizes (MIOpen's CK solvers
    require each tensor < 2 GB the same way). So must every coordinate the kernels form:
    per axis, rows and columns of dX/dY (with pads, strides, dilations and the tilde
    halo) stay within ``2*(Hi + 2*pH) + sH`` in magnitude, which must be <= 2^31-1 (a
    pad, stride or dilation near 2^31 overflows although each value fits an ``int``);
    and GemmM = N*HTildeSlice*WTildeSlice (halo rows included) plus a tile's rows must
    too. The parser already refuses any flag outside a C ``int``, as MIOpenDriver reads
    them. Like the tensor sizes, these hold for every target (the ``cpu`` target runs
    the GPU kernels' decomposition).
``TOO_MANY_SUB_GEMMS``
    More than :data:`~miopen_solver.tilde.MAX_SUB_GEMMS` (862) non-empty tilde sub-GEMMs:
    the kernel keeps one 76-byte record per sub-GEMM in 64 KiB of constant memory. There are
    ``min(YTilde, Y) * min(XTilde, X)`` of them (YTilde = sH/gcd(sH, dH)), counted in O(1),
    so a huge stride with a small filter stays applicable (``-u 100000 -y 3``: 3 row phases)
    and only large strides *and* large filters (e.g. 31x31 with stride 31) are refused. The
    ``cpu`` target runs the same decomposition and takes the same limit.
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

from .command import describe_directions
from .errors import PerfConfigError
from .problem import DTYPE_BYTES, ConvProblem
from .config import KernelSchedule
from .heuristics import default_performance_config
from .target import Target
from .tilde import axes, too_many_sub_gemms

DIRECTION = "DIRECTION"
TRANSPOSED_MODE = "TRANSPOSED_MODE"
DTYPE = "DTYPE"
LAYOUT = "LAYOUT"
SPATIAL_DIM = "SPATIAL_DIM"
INDEX_OVERFLOW = "INDEX_OVERFLOW"
TOO_MANY_SUB_GEMMS = "TOO_MANY_SUB_GEMMS"
NO_VALID_CONFIG = "NO_VALID_CONFIG"
DEPTHWISE = "DEPTHWISE"

REASON_CODES = (DIRECTION, TRANSPOSED_MODE, DTYPE, LAYOUT, SPATIAL_DIM, INDEX_OVERFLOW,
                TOO_MANY_SUB_GEMMS, NO_VALID_CONFIG)
"""Every code a :class:`Reason` may carry (stable; scripts may match on them)."""
NOTE_CODES = (DEPTHWISE,)
"""Every code a note may carry."""

SUPPORTED_DTYPES = ("fp32", "fp16", "bf16")
INDEX_LIMIT = 2**31 - 1
"""Largest element count and byte size of one tensor (32-bit signed indexing)."""
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


def _native_layouts(problem: ConvProblem, target: Target) -> tuple:
    """Layouts accepted for all three tensors on this target (2-D names; 3-D analogues are
    accepted too so a 3-D line reports SPATIAL_DIM, not a layout it cannot help)."""
    if problem.is_3d:
        return ("NDHWC",) if target.is_gpu else ("NDHWC", "NCDHW")
    return ("NHWC",) if target.is_gpu else ("NHWC", "NCHW")


def _layout_reason(problem: ConvProblem, target: Target) -> Reason | None:
    lay = {"dX (in_layout)": problem.in_layout, "W (fil_layout)": problem.fil_layout,
           "dY (out_layout)": problem.out_layout}
    natives = _native_layouts(problem, target)
    values = set(lay.values())
    if len(values) == 1 and values <= set(natives):
        return None
    shown = ", ".join(f"{k} {v}" for k, v in lay.items())
    if len(values) > 1:
        why = "mixed layouts are not applicable on any target"
    elif target.is_gpu:
        why = (f"on {target.arch} only all-{natives[0]} is applicable "
               f"(NHWC is the GPU kernel's native layout; there are no transpose kernels)")
    else:
        why = f"the {target.arch} target accepts all-{' or all-'.join(natives)}"
    return Reason(LAYOUT, f"{shown}: {why}")


GEMM_M_HEADROOM = 1024
"""Rows past GemmM a tile may address (tile_m and TMA boxes are at most 256 rows)."""


def _overflow_reason(problem: ConvProblem) -> Reason | None:
    eb = DTYPE_BYTES.get(problem.dtype, 4)
    tensors = (("dY", problem.dy_elems), ("W", problem.w_elems), ("dX", problem.dx_elems))
    bad = [f"{name} is {n * eb} bytes ({n} elements)" for name, n in tensors if n * eb > INDEX_LIMIT]
    parts = ["; ".join(bad) + ": past 2^31-1 bytes, the limit of 32-bit indexing (element offsets and AMD "
             "buffer-resource byte sizes)"] if bad else []
    if not problem.is_3d:
        h, w = axes(problem)
        bad = [f"coordinates reach {formula} = {2 * (a.size_in + 2 * a.pad) + a.stride}"
               for a, formula in ((h, "2*(Hi + 2*pH) + sH"), (w, "2*(Wi + 2*pW) + sW"))
               if 2 * (a.size_in + 2 * a.pad) + a.stride > INDEX_LIMIT]
        gemm_m = problem.N * h.slice * w.slice
        if gemm_m + GEMM_M_HEADROOM > INDEX_LIMIT:
            bad.append(f"GemmM = N*HTildeSlice*WTildeSlice = {problem.N}*{h.slice}*{w.slice} = {gemm_m} "
                       f"(+{GEMM_M_HEADROOM} rows of a tile)")
        if bad:
            parts.append("; ".join(bad) + ": past 2^31-1, the limit of the kernels' 32-bit int arithmetic")
    return Reason(INDEX_OVERFLOW, "; ".join(parts)) if parts else None


def check(problem: ConvProblem, target: Target, *, forw: int = BACKWARD_DATA) -> Verdict:
    """The structural guards only (everything but ``NO_VALID_CONFIG``); see
    :func:`is_applicable` for the arguments."""
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
    layout = _layout_reason(problem, target)
    if layout:
        reasons.append(layout)
    if problem.spatial_dim != 2:
        reasons.append(Reason(SPATIAL_DIM, f"{problem.spatial_dim}-D convolution; this solver is 2-D only"))
    overflow = _overflow_reason(problem)
    if overflow:
        reasons.append(overflow)
    if not problem.is_3d:
        too_many = too_many_sub_gemms(*axes(problem))
        if too_many:
            reasons.append(Reason(TOO_MANY_SUB_GEMMS, too_many))
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
        :class:`ConvProblem` and :class:`Target`.
    """
    verdict = check(problem, target, forw=forw)
    if not verdict.ok:
        return verdict
    try:
        default = default_performance_config(problem, target)
    except PerfConfigError as e:
        return Verdict(False, (Reason(NO_VALID_CONFIG, str(e)),), verdict.notes)
    if default.schedule is KernelSchedule.DIRECT:      # the note is about GEMMs: the default is not one
        return Verdict(True, (), tuple(n for n in verdict.notes if n.code != DEPTHWISE))
    return verdict
