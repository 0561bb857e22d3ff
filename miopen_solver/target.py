"""GPU targets: what a kernel may assume about the device it is built for.

Presets cover the architectures the solver knows (``gfx90a``, ``gfx942``, ``gfx950``,
``sm_80``, ``sm_90``) plus ``cpu`` for the numpy engine. ``runtime`` fills a Target from
a live device (:func:`from_device`).

Sources for the preset numbers: shared memory per block is the opt-in maximum
(CUDA C Programming Guide, "Technical Specifications per Compute Capability": 163 KB on
8.0, 227 KB on 9.0); LDS per workgroup is 64 KiB on CDNA2/CDNA3 and 160 KiB on CDNA4
(AMD Instinct ISA guides). Packed atomics: PTX ``red/atom.add.noftz.f16x2`` exists from
sm_60, ``.bf16x2`` only from sm_90 (PTX ISA, ``atom`` target notes; cuda_bf16.hpp falls back
to a CAS loop below sm_90); ``global_atomic_pk_add_f16`` exists on gfx90a,
``global_atomic_pk_add_bf16`` from gfx940 on (CDNA3 ISA). Grid limits: x <= 2^31-1,
y and z <= 65535 blocks (CUDA and HIP ``maxGridSize``); on AMD the grid size in work-items
(blocks x threads) must also fit 32 bits (HSA dispatch packet).

Matrix atoms are the shape one matrix instruction covers across a warp/wave:
``mma.sync.m16n8k16`` (NVIDIA fp16/bf16), ``v_mfma_f32_32x32x8{f16,bf16_1k}`` and
``v_mfma_f32_16x16x16{f16,bf16_1k}`` (AMD CDNA2/3). fp32 runs on FFMA: its "atom" is the
lane grid of the warp (4x8 lanes on a 32-wide warp, 8x8 on a 64-wide wave), one FMA each.
fp32 with TF32 math (the ``"tf32"`` entry; :mod:`miopen_solver.tf32`) has
``mma.sync.m16n8k8.row.col.f32.tf32.tf32.f32`` on sm_80/sm_90 (PTX ISA: TF32 ``mma`` from
sm_80) and ``v_mfma_f32_16x16x8_xf32`` on gfx942 (CDNA3 ISA; gfx90a and gfx950 have no XF32
MFMA); the ``cpu`` preset simulates NVIDIA's.
Hopper's warpgroup MMA (``wgmma.mma_async.m64nNk16``, 128 threads per instruction) is not
in the atom lists: a config opts into it with ``wgmma=1`` where :attr:`Target.wgmma` is set
(see :mod:`miopen_solver.spec`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field, replace

from .errors import RecordError, TargetError, shown_value
from .records import check_bool, check_int, check_list, check_str, fields_of
from .text import shorten


@dataclass(frozen=True)
class MmaAtom:
    """One matrix instruction's shape (m x n x k) across a whole warp/wave."""

    name: str
    m: int
    n: int
    k: int

    def accumulators_per_lane(self, wave_size: int) -> int:
        """fp32 accumulator registers one atom leaves in each lane: ``m*n / wave_size``."""
        return self.m * self.n // wave_size


_MMA16 = (MmaAtom("mma16816", 16, 8, 16),)
_FMA32 = (MmaAtom("fma4x8", 4, 8, 1),)
_FMA64 = (MmaAtom("fma8x8", 8, 8, 1),)
_MFMA_F16 = (MmaAtom("mfma32x32x8", 32, 32, 8), MmaAtom("mfma16x16x16", 16, 16, 16))
_MMA_TF32 = (MmaAtom("mma1688tf32", 16, 8, 8),)
_MFMA_XF32 = (MmaAtom("mfma16x16x8xf32", 16, 16, 8),)
TF32_ATOMS = ("mma1688tf32", "mfma16x16x8xf32")
"""Names of the atoms that compute TF32 math (operands rounded to TF32, fp32 accumulation)."""


@dataclass(frozen=True)
class Target:
    """A device architecture as the solver sees it.

    Attributes:
        vendor: ``"nvidia"``, ``"amd"`` or ``"cpu"``.
        arch: ``sm_90``, ``gfx942`` ...; the compile target.
        wave_size: lanes per warp/wave (32 or 64).
        lds_bytes: shared memory / LDS a block may use, bytes.
        max_threads: threads per block.
        atoms: data type (or ``"tf32"``, fp32 data with TF32 math) -> matrix atoms
            available for it (first = preferred).
        max_accumulators: fp32 accumulators per lane the kernels stay correct and
            spill-free with (NVIDIA: 128 of 255 registers; AMD: 256 with AGPRs, rocKE's
            guard after a spilled 512-accumulator kernel returned wrong dX).
        packed_fp16_atomics / packed_bf16_atomics: a 2-wide packed atomic add exists
            (``red.global.add.noftz.f16x2`` / ``.bf16x2``; ``global_atomic_pk_add_*``).
        async_copy: ``cp.async`` global->shared copies (sm_80+).
        transposed_lds_read: a transposing shared-memory fragment read (``ldmatrix.trans``
            on sm_80+, ``ds_read_b64_tr_b16`` on gfx950); needed for k-outer B tiles.
        wgmma: warpgroup MMA (``wgmma.mma_async``, operands in swizzled shared memory),
            compiled for ``sm_90a``; exists on compute capability 9.0 only (not on
            sm_100/sm_120, whose arch-specific features differ).
        regs_per_cu: 32-bit registers per multiprocessor (64 K on sm_80/sm_90; used to
            size persistent grids).
        num_cus: multiprocessors / compute units (a preset's typical count).
        max_grid: most blocks per launch along x, y, z.
        name: the preset name (``""`` for a hand-made Target).
    """

    vendor: str
    arch: str
    wave_size: int
    lds_bytes: int
    max_threads: int
    atoms: dict = field(hash=False, compare=False)
    max_accumulators: int = 128
    packed_fp16_atomics: bool = True
    packed_bf16_atomics: bool = True
    async_copy: bool = False
    transposed_lds_read: bool = False
    wgmma: bool = False
    regs_per_cu: int = 65536
    num_cus: int = 108
    max_grid: tuple = (2**31 - 1, 65535, 65535)
    name: str = ""

    @property
    def base_arch(self) -> str:
        """:attr:`arch` without feature suffixes (``gfx942:sramecc+:xnack-`` -> ``gfx942``):
        the arch a perf-db record, a kernel name and the vendor tables are keyed by."""
        return self.arch.split(":")[0]

    def atoms_for(self, dtype: str) -> tuple:
        """The matrix atoms for ``dtype``, preferred first; ``()`` when there is none."""
        return self.atoms.get(dtype, ())

    def atom(self, dtype: str, name: str | None = None) -> MmaAtom | None:
        """The first atom for ``dtype`` (named ``name`` if given), or None."""
        for a in self.atoms_for(dtype):
            if name is None or a.name == name:
                return a
        return None

    def with_(self, **changes) -> "Target":
        return replace(self, **changes)

    def packed_atomics(self, dtype: str) -> bool:
        """Whether a 2-wide packed atomic add exists for a 16-bit ``dtype`` (fp32 atomics
        always exist, so ``"fp32"`` answers True)."""
        if dtype == "fp16":
            return self.packed_fp16_atomics
        if dtype == "bf16":
            return self.packed_bf16_atomics
        return dtype == "fp32"

    @property
    def max_grid_work_items(self) -> int | None:
        """Most work-items (blocks x threads) along one grid axis, or None for no limit
        beyond :attr:`max_grid` (AMD: 2^32-1, the HSA dispatch packet's 32-bit grid size)."""
        return 2**32 - 1 if self.vendor == "amd" else None

    @property
    def is_gpu(self) -> bool:
        return self.vendor in ("nvidia", "amd")

    @property
    def compile_arch(self) -> str:
        """The compiler's target name for this device (:func:`compile_arch`)."""
        return compile_arch(self.arch)

    def to_record(self) -> dict:
        """Every field as plain, JSON-ready data (atoms as ``[name, m, n, k]`` lists);
        :meth:`from_record` inverts it exactly, so a worker process sees the same target
        as the driver (a live device's numbers and feature flags included)."""
        rec = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "atoms":
                v = {dt: [[a.name, a.m, a.n, a.k] for a in atoms] for dt, atoms in v.items()}
            elif isinstance(v, tuple):
                v = list(v)
            rec[f.name] = v
        return rec

    @classmethod
    def from_record(cls, rec: dict) -> "Target":
        """Inverse of :meth:`to_record`, every field checked: ``vendor`` one of nvidia, amd,
        cpu; ``wave_size`` 32 or 64; the other numbers ints >= 1 (``max_grid`` three of them);
        the feature flags bools; ``atoms`` a dict of ``[name, m, n, k]`` lists.

        Raises:
            RecordError: not a dict, a field missing or unknown (a record from another
                version) or of the wrong type or range, naming it (a ValueError).
        """
        names = [f.name for f in dataclasses.fields(cls)]
        fields_of(rec, names, "target", what="a Target.to_record() dict, with the fields " + ", ".join(names))
        kw = {}
        for f in dataclasses.fields(cls):
            v = rec[f.name]
            if f.name == "vendor":
                kw[f.name] = check_str(v, "target", f.name, ("nvidia", "amd", "cpu"))
            elif f.name == "wave_size":
                if check_int(v, "target", f.name, allowed="32 or 64") not in (32, 64):
                    raise RecordError("target", f.name, v, "32 or 64")
                kw[f.name] = v
            elif f.name == "atoms":
                kw[f.name] = _atoms_of(v)
            elif f.name == "max_grid":
                kw[f.name] = tuple(check_int(n, "target", f"max_grid[{i}]", 1)
                                   for i, n in enumerate(check_list(v, "target", f.name, 3)))
            elif f.type == "bool":
                kw[f.name] = check_bool(v, "target", f.name)
            elif f.type == "int":
                kw[f.name] = check_int(v, "target", f.name, 1)
            elif f.name == "name":          # "" for a hand-made Target
                if not isinstance(v, str):
                    raise RecordError("target", f.name, v, "a string")
                kw[f.name] = v
            else:
                kw[f.name] = check_str(v, "target", f.name)
        return cls(**kw)


def _atoms_of(rec) -> dict:
    """A target record's ``atoms``: data type -> ``[[name, m, n, k], ...]`` as MmaAtoms.

    Raises:
        RecordError: anything of another shape or type.
    """
    allowed = "a dict of data type -> list of [name, m, n, k] (name text, m, n, k ints >= 1)"
    if not isinstance(rec, dict):
        raise RecordError("target", "atoms", rec, allowed)
    out = {}
    for dt, atoms in rec.items():
        check_str(dt, "target", "atoms", allowed=allowed)
        out[dt] = []
        for i, atom in enumerate(check_list(atoms, "target", f"atoms.{dt}", allowed=allowed)):
            where = f"atoms.{dt}[{i}]"
            name, m, n, k = check_list(atom, "target", where, 4, allowed)
            out[dt].append(MmaAtom(check_str(name, "target", where, allowed=allowed),
                                   *(check_int(v, "target", where, 1, allowed) for v in (m, n, k))))
        out[dt] = tuple(out[dt])
    return out


PRESETS = {
    "sm_80": Target("nvidia", "sm_80", 32, 166912, 1024,
                    {"fp16": _MMA16, "bf16": _MMA16, "fp32": _FMA32, "tf32": _MMA_TF32},
                    max_accumulators=128, packed_bf16_atomics=False, async_copy=True,
                    transposed_lds_read=True, num_cus=108),
    "sm_90": Target("nvidia", "sm_90", 32, 232448, 1024,
                    {"fp16": _MMA16, "bf16": _MMA16, "fp32": _FMA32, "tf32": _MMA_TF32},
                    max_accumulators=128, async_copy=True, transposed_lds_read=True, wgmma=True,
                    num_cus=132),
    "gfx90a": Target("amd", "gfx90a", 64, 65536, 1024,
                     {"fp16": _MFMA_F16, "bf16": _MFMA_F16, "fp32": _FMA64},
                     max_accumulators=256, packed_bf16_atomics=False, num_cus=104),
    "gfx942": Target("amd", "gfx942", 64, 65536, 1024,
                     {"fp16": _MFMA_F16, "bf16": _MFMA_F16, "fp32": _FMA64, "tf32": _MFMA_XF32},
                     max_accumulators=256, num_cus=304),
    "gfx950": Target("amd", "gfx950", 64, 163840, 1024,
                     {"fp16": _MFMA_F16, "bf16": _MFMA_F16, "fp32": _FMA64},
                     max_accumulators=256, transposed_lds_read=True, num_cus=256),
    "cpu": Target("cpu", "cpu", 32, 232448, 1024,
                  {"fp16": _MMA16, "bf16": _MMA16, "fp32": _FMA32, "tf32": _MMA_TF32},
                  max_accumulators=128, num_cus=1),
}
for _k, _t in list(PRESETS.items()):
    PRESETS[_k] = replace(_t, name=_k)


def get_target(name: str) -> Target:
    """A preset by arch name. ``sm_90a`` is accepted as ``sm_90``; ``gfx942:sramecc+:xnack-``
    style feature suffixes are ignored.

    Raises:
        TargetError: an unknown arch, or a name that is not a string, naming the known ones.
    """
    known = ", ".join(sorted(PRESETS))
    if not isinstance(name, str):
        raise TargetError(f"arch {shown_value(name)}: allowed: an arch name: {known}", name, known)
    base = name.split(":")[0].strip().lower()
    if base == "sm_90a":
        base = "sm_90"
    if base not in PRESETS:
        raise TargetError(f"unknown arch {shorten(name)!r}; known: {known}", name, known)
    return PRESETS[base]


ARCH_SPECIFIC = ("sm_90", "sm_100", "sm_120")
"""NVIDIA archs whose kernels are compiled for the arch-specific target (``sm_90a``: wgmma and
the tensor-memory copies exist only there)."""


def compile_arch(arch: str) -> str:
    """The compiler target for ``arch``, the one name NVRTC, nvcc and hiprtc are given:
    ``sm_90`` -> ``sm_90a`` (likewise ``sm_100a``, ``sm_120a``); other archs as they are
    (AMD feature suffixes such as ``:sramecc+`` kept: hiprtc takes them)."""
    return arch + "a" if arch in ARCH_SPECIFIC else arch


def from_device(vendor: str, arch: str, *, lds_bytes: int | None = None,
                max_threads: int | None = None, num_cus: int | None = None,
                wave_size: int | None = None) -> Target:
    """A Target for a live device: the nearest preset, with the device's own numbers.

    ``arch`` is e.g. ``sm_90`` / ``sm_89`` / ``sm_90a`` / ``gfx942:sramecc+``. NVIDIA archs at
    or above sm_90 take the sm_90 preset, sm_80..sm_89 the sm_80 preset.

    Raises:
        ValueError: an unknown vendor, an NVIDIA arch below sm_80 (no bf16 MMA, no
            ``cp.async``) or one that is not ``sm_<digits>[letters]``, or an AMD arch
            without a preset.
    """
    if vendor == "nvidia":
        m = re.fullmatch(r"sm_(\d+)[a-z]*", arch.strip().lower())
        if m is None:
            raise ValueError(f"NVIDIA arch {arch!r} is not of the form sm_<digits>, e.g. sm_90")
        cc = int(m.group(1))
        if cc < 80:
            raise ValueError(f"NVIDIA arch {arch} is below sm_80; the kernels need bf16 MMA and cp.async")
        base = get_target("sm_90" if cc >= 90 else "sm_80")
    elif vendor == "amd":
        base = get_target(arch)
    else:
        raise ValueError(f"unknown vendor {vendor!r}; expected 'nvidia' or 'amd'")
    changes = {"arch": arch}
    if vendor == "nvidia":
        changes["wgmma"] = cc == 90
    for k, v in (("lds_bytes", lds_bytes), ("max_threads", max_threads), ("num_cus", num_cus),
                 ("wave_size", wave_size)):
        if v is not None:
            changes[k] = v
    return replace(base, **changes)
