"""The backward-data convolution problem: shapes, dtype, layouts and derived sizes.

Terms (MIOpen / CK): dX is the input gradient (``-H/-W`` are its spatial size, NHWC or
NCHW), dY the output gradient (Ho x Wo, K channels), W the filter (K x cpg x Y x X, stored
KYXC for NHWC). ``cpg = C/G`` and ``kpg = K/G``.

Output size follows MIOpen's ``miopenGetConvolutionNdForwardOutputDim``
(src/convolution.cpp): ``Ho = (Hi + 2*pH - dH*(Y-1) - 1) // sH + 1``, except that a result
below 1 is an error here where MIOpen silently clamps it to 1.
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass

from .errors import ArgumentError, shown_value

DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1, "fp8": 1, "bf8": 1}
"""Storage size in bytes per element of each data type name."""

DTYPE_KEY = {"fp32": "FP32", "fp16": "FP16", "bf16": "BF16", "int8": "INT8", "fp8": "FP8", "bf8": "BF8"}
"""Data type spelling in MIOpen's problem key (``EncodeDataTypesForKey``)."""

DEPTH_NONE = {"Di": 1, "Z": 1, "pD": 0, "sD": 1, "dD": 1}
"""The depth fields' values in a 2-D problem (any other is refused)."""
INT_FIELDS = ("N", "C", "Hi", "Wi", "K", "Y", "X", "pH", "pW", "sH", "sW", "dH", "dW", "G", "spatial_dim", "Di", "Z",
              "pD", "sD", "dD")
"""The :class:`ConvProblem` fields that are ints."""

LAYOUTS_2D = ("NCHW", "NHWC", "CHWN")
LAYOUTS_3D = ("NCDHW", "NDHWC")


def layout_name(name: str, value, dims: tuple = ("NCHW", "NCDHW")) -> str:
    """``value`` in upper case: an order of the letters of one of ``dims`` (each once), in any
    case (``NHWC``, ``nchw``, ``HWNC``: the applicability check says which are supported).

    Raises:
        ArgumentError: ``NAME VALUE: allowed: ...`` for anything else (a non-string too).
    """
    def fits(text):
        return any(sorted(text) == sorted(d) for d in dims)
    up = value.upper() if isinstance(value, str) else ""
    if not fits(up):
        named = ", ".join(lay for lay in LAYOUTS_2D + LAYOUTS_3D if fits(lay))
        raise ArgumentError(name, value, f"the letters {' or '.join(dims)}, each once, in any order and case (e.g. {named})")
    return up


def output_size(size_in: int, filt: int, pad: int, stride: int, dilation: int) -> int:
    """Forward output size along one axis, ``(in + 2*pad - dilation*(filter-1) - 1) // stride + 1``
    (floor division): < 1 exactly when the dilated filter exceeds the padded input. MIOpen's
    ``max(1, ...)`` with C++ division toward zero (``GetForwardOutputTensorWithLayout``) is
    the same wherever this is >= 1."""
    return (size_in + 2 * pad - dilation * (filt - 1) - 1) // stride + 1


# ----------------------------------------------------------------- layouts in memory
KEY_LAYOUTS = ("NCHW", "NHWC", "CHWN", "NCDHW", "NDHWC")
"""The uniform layouts MIOpen tries, in order, when it names a problem's layouts
(``conv::ProblemDescription::HeuristicUpdateLayouts``)."""


def packed_strides(lens: dict, layout: str) -> dict:
    """Element strides of a packed tensor with dims ``lens`` (letter -> length) stored in
    ``layout``: each letter's stride is the product of the lengths of the letters after it
    (MIOpen ``tensor_layout_to_strides``, which MIOpenDriver uses for ``--*_layout``)."""
    out, acc = {}, 1
    for letter in reversed(layout):
        out[letter] = acc
        acc *= lens[letter]
    return out


def same_memory(lens: dict, a: str, b: str) -> bool:
    """True when a packed tensor of ``lens`` has the same bytes in layouts ``a`` and ``b``:
    the dims longer than 1 come in the same order (a dim of length 1 contributes no offset,
    so it may sit anywhere)."""
    return [x for x in a if lens[x] > 1] == [x for x in b if lens[x] > 1]


def possible_layout(lens: dict, strides: dict, layout: str, ignore_degenerate: bool) -> bool:
    """MIOpen's ``TensorDescriptor::IsPossibleLayout``: the strides read in ``layout``'s
    order never increase; with ``ignore_degenerate`` (``LayoutValidationMode::
    IgnoreDegenerateStrides``) dims of length 1 are skipped. A layout of another rank is
    not possible."""
    if sorted(layout) != sorted(lens):
        return False
    seq = [strides[x] for x in layout if not (ignore_degenerate and lens[x] == 1)]
    return all(a >= b for a, b in zip(seq, seq[1:]))


def inferred_layout(lens: dict, strides: dict, canonical: str) -> str:
    """MIOpen's ``TensorDescriptor::GetLayout_str`` for a descriptor set from strides
    (``find_permutation``): the canonical letters stably sorted by (stride, length),
    largest first."""
    order = sorted(range(len(canonical)), key=lambda i: (strides[canonical[i]], lens[canonical[i]]), reverse=True)
    # sorted() is stable and reverse=True keeps equal keys in their original order, as
    # std::stable_sort with std::greater does
    return "".join(canonical[i] for i in order)


def miopen_layouts(tensors) -> tuple:
    """The layout names MIOpen gives a convolution's three tensors, in the order given
    (``(lens, layout)`` pairs: lengths by canonical letter and the packed storage layout).

    rocm-libraries ``projects/miopen/src/conv/problem_description.cpp``
    (``HeuristicUpdateLayouts``, 12b22cd0) over ``src/tensor.cpp`` (``IsPossibleLayout``,
    ``GetLayout_str``, 0c3ff24a): each tensor's own name is inferred from its strides; when
    the three agree on a layout MIOpen knows, that stays; else the first of
    :data:`KEY_LAYOUTS` all three strides allow (never increasing in its order) wins,
    first with every dim counted, then ignoring dims of length 1; else each keeps its own.
    """
    canonical = "NCDHW" if len(tensors[0][0]) == 5 else "NCHW"
    strides = [packed_strides(lens, lay) for lens, lay in tensors]
    own = [inferred_layout(lens, st, canonical) for (lens, _), st in zip(tensors, strides)]
    if len(set(own)) == 1 and own[0] in KEY_LAYOUTS:
        return tuple(own)
    for ignore in (False, True):
        for cand in KEY_LAYOUTS:
            if all(possible_layout(lens, st, cand, ignore) for (lens, _), st in zip(tensors, strides)):
                return (cand,) * len(tensors)
    return tuple(own)


def valid_range(offset: int, stride: int, count: int, size: int) -> tuple:
    """``[t0, t1)``: the ``t < count`` with ``0 <= t*stride + offset < size`` (``stride >= 1``),
    in O(1) -- the indices of a strided index map that land inside a tensor of ``size``."""
    t0 = max(0, -(offset // stride))
    t1 = min(count, (size - 1 - offset) // stride + 1) if size - 1 - offset >= 0 else 0
    return t0, max(t0, t1)


INT_MIN, INT_MAX = -2**31, 2**31 - 1
"""The range of a C ``int``: MIOpenDriver reads every integer flag into one, and MIOpen's
problem descriptors hold them; every integer field of a :class:`ConvProblem` stays in it."""


@dataclass(frozen=True)
class ConvProblem:
    """One backward-data convolution, as MIOpenDriver's conv flags describe it.

    Spatial fields carry the 3-D depth too (``Di``, ``Z``, ``pD``, ``sD``, ``dD``); a 2-D
    problem (``spatial_dim == 2``) has them at 1/0 (:data:`DEPTH_NONE`; another value is
    refused).

    Layouts use MIOpenDriver's flag roles: ``in_layout`` is dX (the convolution input),
    ``out_layout`` is dY, ``fil_layout`` is W.

    ``tf32``: fp32 data computed with TF32 math (MIOpenDriver ``-M 0``; MIOpen's
    ``UseTF32()``, resolved for a target by :func:`miopen_solver.tf32.resolve`): part of the
    problem, so its keys carry it (:meth:`problem_key`, :meth:`miopen_db_key`). False for every
    line without ``-M 0`` (MIOpen's default, IEEE fp32).

    Raises:
        ValueError: a depth field of a 2-D problem other than :data:`DEPTH_NONE`'s, a derived
            output size below 1, a group count that does not divide C
            and K, a non-positive size or negative pad (the depth fields too), a size that is
            not an int (bool and float refused; numpy ints kept as int), an unknown dtype or
            mode, a layout that is not an order of the letters NCHW or NCDHW (any case: stored in
            upper case; :func:`layout_name`), trans_pads not 3 ints. (The command parser
            turns these into :class:`~miopen_solver.errors.MiopenCommandError` naming the flag.)
    """

    N: int
    C: int
    Hi: int
    Wi: int
    K: int
    Y: int
    X: int
    pH: int = 0
    pW: int = 0
    sH: int = 1
    sW: int = 1
    dH: int = 1
    dW: int = 1
    G: int = 1
    dtype: str = "fp32"
    in_layout: str = "NCHW"
    out_layout: str = "NCHW"
    fil_layout: str = "NCHW"
    spatial_dim: int = 2
    Di: int = 1
    Z: int = 1
    pD: int = 0
    sD: int = 1
    dD: int = 1
    mode: str = "conv"
    trans_pads: tuple = (0, 0, 0)
    tf32: bool = False

    def __post_init__(self):
        for name in INT_FIELDS:             # ints (numpy's too, kept as int), never bool or float
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise ValueError(f"{name} must be an int, got {v!r}")
            if not INT_MIN <= v <= INT_MAX:
                raise ValueError(f"{name} {shown_value(v)} is outside a 32-bit int; allowed: {INT_MIN} to {INT_MAX}")
            object.__setattr__(self, name, int(v))
        if self.spatial_dim not in (2, 3):
            raise ValueError(f"spatial_dim must be 2 or 3, got {self.spatial_dim}")
        if not isinstance(self.dtype, str) or self.dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype {self.dtype!r}; allowed: {', '.join(DTYPE_BYTES)}")
        for name in ("in_layout", "out_layout", "fil_layout"):     # any case, as the command line takes them
            object.__setattr__(self, name, layout_name(name, getattr(self, name)))
        if not isinstance(self.mode, str) or self.mode not in ("conv", "trans"):
            raise ValueError(f"mode {self.mode!r}; allowed: conv, trans")
        pads = self.trans_pads
        if (not isinstance(pads, (tuple, list)) or len(pads) != 3
                or any(isinstance(v, bool) or not isinstance(v, numbers.Integral) or not INT_MIN <= v <= INT_MAX
                       for v in pads)):
            got = f"({', '.join(map(shown_value, pads))})" if isinstance(pads, (tuple, list)) else shown_value(pads)
            raise ValueError(f"trans_pads must be 3 ints (output pads along D, H, W), each a C int, got {got}")
        object.__setattr__(self, "trans_pads", tuple(int(v) for v in pads))
        for name in ("N", "C", "Hi", "Wi", "K", "Y", "X", "sH", "sW", "dH", "dW", "G", "Di", "Z", "sD", "dD"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("pH", "pW", "pD"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.spatial_dim == 2:           # no depth: the fields keep their 1/0 (sizes count them)
            for name, none in DEPTH_NONE.items():
                if getattr(self, name) != none:
                    raise ValueError(f"{name} {getattr(self, name)}: a 2-D problem (spatial_dim 2) has no depth; "
                                     f"allowed: {none}, or spatial_dim 3")
        if self.C % self.G or self.K % self.G:
            raise ValueError(f"group count {self.G} must divide C={self.C} and K={self.K}")
        if not isinstance(self.tf32, bool):
            raise ValueError(f"tf32 must be a bool, got {self.tf32!r}")
        if self.tf32 and self.dtype != "fp32":
            raise ValueError(f"TF32 math applies to fp32 data only, got {self.dtype}")
        if self.mode == "conv":
            for name, v in (("Ho", self.Ho), ("Wo", self.Wo)) + ((("Do", self.Do),) if self.is_3d else ()):
                if v < 1:
                    raise ValueError(f"derived {name}={v} < 1: the filter does not fit the padded input")

    # ----------------------------------------------------------------- derived sizes
    @property
    def is_3d(self) -> bool:
        return self.spatial_dim == 3


    @property
    def Ho(self) -> int:
        """dY height (MIOpen's floor formula, unclamped)."""
        if self.mode == "trans":
            return self.sH * (self.Hi - 1) + self.dH * (self.Y - 1) + 1 - 2 * self.pH + self.trans_pads[1]
        return output_size(self.Hi, self.Y, self.pH, self.sH, self.dH)

    @property
    def Wo(self) -> int:
        """dY width (MIOpen's floor formula, unclamped)."""
        if self.mode == "trans":
            return self.sW * (self.Wi - 1) + self.dW * (self.X - 1) + 1 - 2 * self.pW + self.trans_pads[2]
        return output_size(self.Wi, self.X, self.pW, self.sW, self.dW)

    @property
    def Do(self) -> int:
        """dY depth (3-D only; 1 for 2-D problems)."""
        if not self.is_3d:
            return 1
        return output_size(self.Di, self.Z, self.pD, self.sD, self.dD)

    @property
    def cpg(self) -> int:
        """dX channels per group, C/G."""
        return self.C // self.G

    @property
    def kpg(self) -> int:
        """dY channels per group, K/G."""
        return self.K // self.G

    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def compute_type(self) -> str:
        """The math of the problem's GEMMs: ``"tf32"`` for fp32 data with TF32 math, else
        the storage type (``fp32``, ``fp16``, ``bf16``: fp32 accumulation for all)."""
        return "tf32" if self.tf32 else self.dtype

    @property
    def is_pointwise(self) -> bool:
        """1x1 filter, stride 1, pad 0 (dilation is irrelevant for a 1x1 filter)."""
        return (self.Y == 1 and self.X == 1 and self.sH == 1 and self.sW == 1
                and self.pH == 0 and self.pW == 0 and not self.is_3d)

    @property
    def is_depthwise(self) -> bool:
        return self.G > 1 and self.cpg == 1 and self.kpg == 1

    @property
    def dy_elems(self) -> int:
        return self.N * self.K * self.Do * self.Ho * self.Wo

    @property
    def dx_elems(self) -> int:
        return self.N * self.C * self.Di * self.Hi * self.Wi

    @property
    def w_elems(self) -> int:
        return self.K * self.cpg * self.Z * self.Y * self.X

    @property
    def flops(self) -> int:
        """Forward FLOP count ``2*N*C*Y*X*K*Ho*Wo/G`` (MIOpenDriver's flopCnt; 3-D adds Z*Do)."""
        return 2 * self.N * self.cpg * self.Z * self.Y * self.X * self.K * self.Do * self.Ho * self.Wo

    @property
    def min_bytes(self) -> int:
        """Bytes a kernel must at least move: read dY and W once, write dX once."""
        return (self.dy_elems + self.w_elems + self.dx_elems) * self.elem_bytes

    @property
    def all_nhwc(self) -> bool:
        """All three layout flags say NHWC (NDHWC): the flags, not the bytes (see
        :attr:`nhwc_memory`)."""
        nat = "NDHWC" if self.is_3d else "NHWC"
        return self.in_layout == nat and self.out_layout == nat and self.fil_layout == nat

    def tensor_lengths(self) -> dict:
        """``{"dY": lens, "W": lens, "dX": lens}``, each ``{letter: length}`` in MIOpen's
        canonical letters (the filter's K, cpg, Y, X as N, C, H, W; 3-D adds D)."""
        if self.is_3d:
            return {"dY": dict(N=self.N, C=self.K, D=self.Do, H=self.Ho, W=self.Wo),
                    "W": dict(N=self.K, C=self.cpg, D=self.Z, H=self.Y, W=self.X),
                    "dX": dict(N=self.N, C=self.C, D=self.Di, H=self.Hi, W=self.Wi)}
        return {"dY": dict(N=self.N, C=self.K, H=self.Ho, W=self.Wo),
                "W": dict(N=self.K, C=self.cpg, H=self.Y, W=self.X),
                "dX": dict(N=self.N, C=self.C, H=self.Hi, W=self.Wi)}

    def tensor_layouts(self) -> dict:
        """``{"dY": out_layout, "W": fil_layout, "dX": in_layout}`` (the flags)."""
        return {"dY": self.out_layout, "W": self.fil_layout, "dX": self.in_layout}

    def stored_as(self, layout: str) -> bool:
        """Every tensor has the bytes of a packed ``layout`` tensor (:func:`same_memory`):
        its flag is ``layout``, or differs only in where dims of length 1 sit (a 1x1 filter
        in NCHW is KYXC; C=1 or H=W=1 makes NCHW and NHWC one order).

        Raises:
            ArgumentError: ``layout`` is not a layout of the problem's rank (:func:`layout_name`)."""
        layout = layout_name("layout", layout, ("NCDHW",) if self.is_3d else ("NCHW",))
        lens, lays = self.tensor_lengths(), self.tensor_layouts()
        return all(sorted(lays[t]) == sorted(lens[t]) and same_memory(lens[t], lays[t], layout) for t in lens)

    @property
    def nhwc_memory(self) -> bool:
        """dX, dY and W are NHWC (NDHWC; W KYXC) in memory, whatever the flags say: what the
        GPU kernels read and write with no data movement."""
        return self.stored_as("NDHWC" if self.is_3d else "NHWC")

    @property
    def nchw_memory(self) -> bool:
        """dX, dY and W are NCHW (NCDHW) in memory."""
        return self.stored_as("NCDHW" if self.is_3d else "NCHW")

    def key_layouts(self) -> tuple:
        """``(dY, W, dX)`` layout names as MIOpen keys this backward-data problem
        (:func:`miopen_layouts` over "in" = dY, weights, "out" = dX)."""
        lens, lays = self.tensor_lengths(), self.tensor_layouts()
        if any(sorted(lays[t]) != sorted(lens[t]) for t in lens):      # a layout of another rank
            return (self.out_layout, self.fil_layout, self.in_layout)
        return miopen_layouts([(lens[t], lays[t]) for t in ("dY", "W", "dX")])

    def replace(self, **changes) -> "ConvProblem":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    # ----------------------------------------------------------------- MIOpen key
    def problem_key(self) -> str:
        """MIOpen's perf-db key for this problem as backward data.

        Follows ``ProblemDescription::Serialize`` (MIOpen src/conv/problem_description.cpp):
        for direction B the "in" tensor is dY (K, Ho, Wo) and "out" is dX (C, Hi, Wi);
        the layouts are the names MIOpen gives the tensors (:meth:`key_layouts`: a mixed
        line whose tensors all fit one layout is keyed as that layout); one layout token
        when all three are NCHW/NCDHW, else ``in-weights-out``;
        ``_g<G>`` when G != 1; ``_cxTF32`` for TF32 math (:data:`miopen_solver.tf32.LEGACY_KEY_SUFFIX`:
        MIOpen 3.6.0's, reported in rocm-libraries issue #11503). Example::

            64-56-56-1x1-256-56-56-32-0x0-1x1-1x1-0-NHWC-NHWC-NHWC-FP16-B
        """
        if self.is_3d:
            in_sp = f"{self.K}-{self.Do}-{self.Ho}-{self.Wo}"
            fil = f"{self.Z}x{self.Y}x{self.X}"
            out_sp = f"{self.C}-{self.Di}-{self.Hi}-{self.Wi}"
            pads = f"{self.pD}x{self.pH}x{self.pW}"
            strides = f"{self.sD}x{self.sH}x{self.sW}"
            dils = f"{self.dD}x{self.dH}x{self.dW}"
            default = "NCDHW"
        else:
            in_sp = f"{self.K}-{self.Ho}-{self.Wo}"
            fil = f"{self.Y}x{self.X}"
            out_sp = f"{self.C}-{self.Hi}-{self.Wi}"
            pads = f"{self.pH}x{self.pW}"
            strides = f"{self.sH}x{self.sW}"
            dils = f"{self.dH}x{self.dW}"
            default = "NCHW"
        lay = self.key_layouts()
        layouts = default if all(x == default for x in lay) else "-".join(lay)
        key = (f"{in_sp}-{fil}-{out_sp}-{self.N}-{pads}-{strides}-{dils}-0-{layouts}-"
               f"{DTYPE_KEY[self.dtype]}-{'F' if self.mode == 'trans' else 'B'}")
        if self.G != 1:
            key += f"_g{self.G}"
        if self.tf32:
            key += "_cxTF32"
        return key

    def miopen_db_fields(self) -> dict:
        """The problem as MIOpen's sqlite perf-db ``config`` row, in MIOpen's order.

        ``conv::ProblemDescription::Visit`` (rocm-libraries
        ``projects/miopen/src/include/miopen/conv/problem_description.hpp``, ``00bcc23b``):
        the integer columns ``spatial_dim, in_channels, in_h, in_w, in_d, fil_h, fil_w, fil_d,
        out_channels, batchsize, pad_h, pad_w, pad_d, conv_stride_h, conv_stride_w,
        conv_stride_d, dilation_h, dilation_w, dilation_d, bias, group_count``, then the text
        columns ``layout, data_type, direction``. For direction B "in" is dY (K, Ho, Wo) and
        "out" dX (C); a 2-D problem has depth 1 for tensors (``GetD5``) and 0 for pad, stride
        and dilation (``GetD3``); ``layout`` is "in"'s (dY's) layout as MIOpen names it
        (:meth:`key_layouts`).
        """
        three = self.is_3d
        return {
            "spatial_dim": 3 if three else 2, "in_channels": self.K, "in_h": self.Ho, "in_w": self.Wo,
            "in_d": self.Do if three else 1, "fil_h": self.Y, "fil_w": self.X, "fil_d": self.Z if three else 1,
            "out_channels": self.C, "batchsize": self.N, "pad_h": self.pH, "pad_w": self.pW,
            "pad_d": self.pD if three else 0, "conv_stride_h": self.sH, "conv_stride_w": self.sW,
            "conv_stride_d": self.sD if three else 0, "dilation_h": self.dH, "dilation_w": self.dW,
            "dilation_d": self.dD if three else 0, "bias": 0, "group_count": self.G,
            "layout": self.key_layouts()[0], "data_type": DTYPE_KEY[self.dtype],
            "direction": "F" if self.mode == "trans" else "B",
        } | ({"compute_datatype": "TF32"} if self.tf32 else {})

    def miopen_db_key(self) -> str:
        """MIOpen's text perf-db key (ROCm 6.2 on): :meth:`miopen_db_fields`' values joined
        by ``x``, as MIOpen builds it from ``ProblemDescription::VisitAll`` (rocm-libraries
        ``projects/miopen/test/gtest/db_sync.cpp``, ``f388d024``). Example::

            2x1280x4x4x1x3x3x1x1280x8x1x1x0x1x1x0x1x1x0x0x1xNHWCxFP16xB
            2x64x56x56x1x3x3x1x64x32x1x1x0x1x1x0x1x1x0x0x1xNHWCxFP32xBxTF32   (-M 0)
        """
        return "x".join(str(v) for v in self.miopen_db_fields().values())

    def short_tag(self) -> str:
        """Compact problem spelling used inside kernel names: every field that is compiled
        into a kernel, e.g. ``n32c64h56w56k64y3x3p1x1s1x1d1x1g1``."""
        return (f"n{self.N}c{self.C}h{self.Hi}w{self.Wi}k{self.K}y{self.Y}x{self.X}"
                f"p{self.pH}x{self.pW}s{self.sH}x{self.sW}d{self.dH}x{self.dW}g{self.G}")

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["trans_pads"] = list(self.trans_pads)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "ConvProblem":
        d = dict(d)
        if "trans_pads" in d:
            d["trans_pads"] = tuple(d["trans_pads"])
        return cls(**d)
