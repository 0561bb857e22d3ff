"""TF32 math for fp32 data: MIOpen's math type, the rounding, where it runs.

MIOpen's interface (read in its sources; nothing here is their code):

* **Driver flag** -- ``-M`` / ``--math_type``, an ``int``, default ``1`` (rocm-libraries
  ``projects/miopen/driver/conv_driver.hpp`` ``07647551``, ``AddCmdLineArgs``: "math type of
  compute (Default=1)", with the comment that it should become 0 once TF32 is complete).
  ``SetConvDescriptorFromCmdLineArgs`` refuses values outside ``miopenMathDefault`` (0) ..
  ``miopenMathPedantic`` (1) ("Invalid math_type value", ``exit(0)``) and passes the value
  to ``miopenSetConvolutionAttribute(..., MIOPEN_CONVOLUTION_ATTRIB_MATH_TYPE, ...)``.
  ``miopenMathType_t``: ``miopenMathDefault = 0`` (TF32 allowed for fp32),
  ``miopenMathPedantic = 1`` (IEEE fp32).
* **Library default** -- ``ConvolutionAttribute::MathType`` starts at ``miopenMathPedantic``
  (``src/include/miopen/convolution.hpp``, the copy the code index holds); TF32 is used when
  ``EnvEnableTF32() || math type == miopenMathDefault`` (``ConvolutionDescriptor::EnableTF32``,
  ``src/convolution.cpp`` ``08cfec83``). So a line without ``-M``, or with ``-M 1``, is IEEE
  fp32 in MIOpen too, and here: existing fp32 results do not change. (Had MIOpen's default
  been 0, a pasted line would still run IEEE fp32 here unless it says ``-M 0``: this product
  does not switch an existing user's fp32 math silently.)
* **Environment** -- ``MIOPEN_TF32_OVERRIDE`` and ``NVIDIA_TF32_OVERRIDE`` (booleans, default
  0, ``convolution.hpp``) feed ``EnvEnableTF32``; rocm-libraries PR #1414 defines it as both
  set (a mismatch logged and treated as off). The final body is not in the sources read here,
  so these variables are *not* honoured: a run where one is set says so in an ``Info:`` line,
  and only ``-M 0`` selects TF32.
* **Key** -- ``conv::ProblemDescription::Visit`` (``src/include/miopen/conv/problem_description.hpp``
  ``00bcc23b``) appends a text field ``compute_datatype = "TF32"`` after ``direction`` when the
  data type is FP32 and ``UseTF32()``: the perf-db ``x`` key ends ``...xFP32xBxTF32``. The
  ``-`` key (``ProblemDescription::Serialize``, ``src/conv/problem_description.cpp``
  ``12b22cd0``) has no such field in that version; MIOpen 3.6.0 adds a ``_cxTF32`` suffix to
  it (rocm-libraries issue #11503, reported, not read in code), which is the form used here.
* **Data types** -- TF32 applies to fp32 only: the key field is written only for FP32, CK's
  solvers take it only for ``miopenFloat``, the driver's tolerance only for ``float``. So
  ``convfp16``/``convbfp16`` lines with ``-M 0`` compute as without it (an ``Info:`` line says so).
* **Tolerance** -- ``GetDefaultTolerance``: fp32 with TF32 uses 8.2e-3 ("tf32 has same
  mantissa length as fp16"), and ``VerifyBackward`` multiplies by 10 for implicit GEMM:
  8.2e-2 (``conv_driver.hpp`` ``07647551``).
* **Hardware** -- MIOpen's CK solvers fall back to fp32 kernels where no TF32 instance exists
  (``FillValidKernelsWithTf32Fallback``); TF32 runs on CDNA3's XF32 MFMA (gfx942), CDNA2
  (gfx90a) has none, and MIOpen disabled it on gfx950 (rocm-libraries PR #4017; CDNA4 has no
  XF32 MFMA). :func:`resolve` does the same: on a target without a TF32 matrix instruction
  the problem runs IEEE fp32, with a note.

Here: :class:`~miopen_solver.problem.ConvProblem` ``tf32=True`` is fp32 data computed with
TF32 math (MIOpen's resolved ``UseTF32()``): its keys carry TF32, its GEMM kernels round both
operands to TF32 (``cvt.rna.tf32.f32`` on NVIDIA; the same rounding in integer arithmetic on
AMD) and accumulate in fp32 on ``mma.sync.m16n8k16``'s TF32 sibling ``m16n8k8`` or
``v_mfma_f32_16x16x8_xf32``; the CPU engine rounds the same way (:func:`round_tf32`) before
the same sub-GEMMs. The direct schedule (depthwise) has no matrix instruction and sums in
IEEE fp32 (TF32 allows, and does not require, the rounding): a solution says which math it
runs (``Solution.math``) and is verified with that math's tolerance.
"""

from __future__ import annotations

import numpy as np

MATH_DEFAULT = 0
"""``miopenMathDefault``: TF32 allowed for fp32 (MIOpenDriver ``-M 0``)."""
MATH_PEDANTIC = 1
"""``miopenMathPedantic``: IEEE fp32 (MIOpenDriver ``-M 1``, its default)."""
MATH_TYPES = {MATH_DEFAULT: "miopenMathDefault: TF32 math for fp32", MATH_PEDANTIC: "miopenMathPedantic: IEEE fp32"}
"""The values ``-M`` takes, with their meaning."""
MATH_TYPE_ALLOWED = "0 (miopenMathDefault: TF32 math for fp32) or 1 (miopenMathPedantic: IEEE fp32, the default)"

ENV_OVERRIDES = ("MIOPEN_TF32_OVERRIDE", "NVIDIA_TF32_OVERRIDE")
"""MIOpen's environment switches behind ``EnvEnableTF32`` (not honoured here; see module docstring)."""

KEY_FIELD = ("compute_datatype", "TF32")
"""MIOpen's problem-key field for TF32 (name, value)."""
LEGACY_KEY_SUFFIX = "_cxTF32"
"""The ``-`` key's TF32 suffix (MIOpen 3.6.0, rocm-libraries issue #11503)."""

TOLERANCE = 8.2e-3
"""MIOpenDriver's ``GetDefaultTolerance`` for fp32 with TF32 (before the implicit-GEMM x10)."""

MANTISSA_BITS = 10
"""Explicit mantissa bits of TF32 (fp32 has 23; 13 are dropped)."""

NO_TF32 = {
    "gfx90a": "CDNA2 has no XF32 MFMA",
    "gfx950": "CDNA4 has no XF32 MFMA and MIOpen disables TF32 there (rocm-libraries PR #4017)",
}
"""Why a known target runs TF32 lines in IEEE fp32 (targets with a ``tf32`` atom need no entry)."""


def round_tf32(a) -> np.ndarray:
    """``a`` rounded to TF32 as ``cvt.rna.tf32.f32`` does: to the nearest value with 10
    explicit mantissa bits, ties away from zero; subnormals round on the same grid (their
    last 13 bits), a finite value that rounds past the largest TF32 becomes +-inf, inf stays
    inf, a NaN stays a (quiet) NaN. The result is float32 with its low 13 bits zero.

    Args:
        a: array-like of float32 (other float types are converted to float32 first).

    Returns:
        A new float32 array of ``a``'s shape.
    """
    out = np.array(a, dtype=np.float32, copy=True, order="C")
    round_tf32_(out)
    return out


ROUND_CHUNK = 1 << 18
"""Elements :func:`round_tf32_` rounds at a time (its temporaries are at most
:data:`ROUND_TEMP_BYTES`, whatever the array's size)."""
ROUND_TEMP_BYTES = 16 * ROUND_CHUNK
"""Host bytes of :func:`round_tf32_`'s temporaries (masks and one uint32 term per element of a chunk)."""


def round_tf32_(a: np.ndarray) -> np.ndarray:
    """:func:`round_tf32` in place on a C-contiguous float32 array, :data:`ROUND_CHUNK`
    elements at a time (no copy of ``a``; temporaries of at most :data:`ROUND_TEMP_BYTES`).
    Returns ``a``.

    Raises:
        ValueError: ``a`` is not a contiguous float32 array.
    """
    if a.dtype != np.float32 or not a.flags.c_contiguous:
        raise ValueError(f"round_tf32_ needs a C-contiguous float32 array, got {a.dtype} "
                         f"(contiguous: {a.flags.c_contiguous})")
    flat = a.reshape(-1).view(np.uint32)
    for i in range(0, flat.size, ROUND_CHUNK):
        bits = flat[i:i + ROUND_CHUNK]
        special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)     # inf or NaN
        nan = special & ((bits & np.uint32(0x007FFFFF)) != 0)
        # finite: add half a TF32 ulp to the magnitude bits (a carry may enter the exponent,
        # from the largest finite values into inf), then drop the 13 low bits; inf keeps its bits
        np.add(bits, np.uint32(0x1000), out=bits, where=~special)
        bits &= np.uint32(0xFFFFE000)
        bits[nan] |= np.uint32(0x00400000)          # a NaN stays a quiet NaN, whatever its payload
    return a


def target_reason(target) -> str | None:
    """Why ``target`` cannot run TF32 math (it has no TF32 matrix atom), or None when it can."""
    if target.atoms_for("tf32"):
        return None
    why = NO_TF32.get(target.name or target.base_arch)
    return f"{target.arch} has no TF32 matrix instruction" + (f" ({why})" if why else "")


def resolve(problem, target) -> tuple:
    """MIOpen's ``SetupComputeType`` for one target: ``(problem, note)``.

    A ``tf32`` problem on a target without a TF32 matrix instruction becomes the IEEE fp32
    problem (its keys lose TF32), as MIOpen's solvers fall back to fp32 kernels, with a note
    saying so; anything else is returned as it is, note None.
    """
    if not problem.tf32:
        return problem, None
    why = target_reason(target)
    if why is None:
        return problem, None
    return problem.replace(tf32=False), (f"Math: -M 0 (TF32) runs IEEE fp32 here: {why}; MIOpen falls back "
                                         f"to fp32 kernels the same way")


def math_note(solution) -> str | None:
    """The note a TF32 problem's solution carries: which math runs and its tolerance; None
    for a problem without TF32."""
    p = solution.problem
    if not p.tf32:
        return None
    from .reference import default_tolerance
    tol = default_tolerance(solution.math)
    if solution.math == "tf32":
        return (f"Math: TF32 (-M 0, miopenMathDefault): dY and W rounded to TF32 (10-bit mantissa, "
                f"round to nearest, ties away), fp32 accumulation on {solution.spec.atom.name}; "
                f"verified with MIOpen's TF32 tolerance {tol:g}")
    return (f"Math: -M 0 (TF32) allows TF32; the {solution.schedule.slug} schedule has no matrix instruction "
            f"and sums in IEEE fp32 (verified with the fp32 tolerance {tol:g})")


__all__ = ["ENV_OVERRIDES", "KEY_FIELD", "LEGACY_KEY_SUFFIX", "MATH_DEFAULT", "MATH_PEDANTIC", "MATH_TYPES",
           "MATH_TYPE_ALLOWED", "MANTISSA_BITS", "NO_TF32", "ROUND_CHUNK", "ROUND_TEMP_BYTES", "TOLERANCE",
           "math_note", "resolve", "round_tf32", "round_tf32_", "target_reason"]
