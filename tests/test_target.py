"""Target presets: values checked against vendor documentation, not against the module."""

import pytest

from miopen_solver.errors import TargetError
from miopen_solver.target import PRESETS, from_device, get_target

KIB = 1024

# (vendor, wave, shared bytes per block, max threads, packed fp16 atomic, packed bf16 atomic,
#  async copy, transposing LDS read). Sources: CUDA Programming Guide table "Technical
# Specifications per Compute Capability" (163 KB / 227 KB opt-in shared memory per block);
# AMD CDNA2/CDNA3 ISA (64 KiB LDS, wave64, global_atomic_pk_add_f16; pk_add_bf16 from gfx940);
# CDNA4 (160 KiB LDS, ds_read_b64_tr_b16); PTX ISA: atom/red .bf16x2 requires sm_90.
EXPECTED = {
    "sm_80": ("nvidia", 32, 163 * KIB, 1024, True, False, True, True),
    "sm_90": ("nvidia", 32, 227 * KIB, 1024, True, True, True, True),
    "gfx90a": ("amd", 64, 64 * KIB, 1024, True, False, False, False),
    "gfx942": ("amd", 64, 64 * KIB, 1024, True, True, False, False),
    "gfx950": ("amd", 64, 160 * KIB, 1024, True, True, False, True),
}


@pytest.mark.parametrize("arch", sorted(EXPECTED))
def test_preset_values(arch):
    t = get_target(arch)
    vendor, wave, lds, threads, f16, bf16, async_copy, tr = EXPECTED[arch]
    assert (t.vendor, t.arch, t.name) == (vendor, arch, arch)
    assert t.wave_size == wave
    assert t.lds_bytes == lds
    assert t.max_threads == threads
    assert t.packed_fp16_atomics is f16 and t.packed_atomics("fp16") is f16
    assert t.packed_bf16_atomics is bf16 and t.packed_atomics("bf16") is bf16
    assert t.packed_atomics("fp32") is True
    assert t.async_copy is async_copy
    assert t.transposed_lds_read is tr
    assert t.is_gpu


def test_cpu_preset():
    t = get_target("cpu")
    assert t.vendor == "cpu" and not t.is_gpu
    assert t.max_grid_work_items is None


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvidia_atoms(arch):
    t = get_target(arch)
    for dt in ("fp16", "bf16"):
        shapes = [(a.name, a.m, a.n, a.k) for a in t.atoms_for(dt)]
        assert shapes == [("mma16816", 16, 8, 16)]          # mma.sync.m16n8k16
        assert t.atoms_for(dt)[0].accumulators_per_lane(32) == 4   # 16*8 fp32 over 32 lanes
    fma = t.atom("fp32")
    assert (fma.m, fma.n, fma.k) == (4, 8, 1)               # the 4x8 lane grid of a warp
    assert fma.accumulators_per_lane(32) == 1
    assert t.max_accumulators == 128
    assert t.atom("int8") is None and t.atoms_for("int8") == ()


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942", "gfx950"])
def test_amd_atoms(arch):
    t = get_target(arch)
    for dt in ("fp16", "bf16"):
        shapes = {(a.m, a.n, a.k) for a in t.atoms_for(dt)}
        assert shapes == {(32, 32, 8), (16, 16, 16)}         # v_mfma_f32_32x32x8*, 16x16x16*
    assert t.atom("fp16", "mfma32x32x8").accumulators_per_lane(64) == 16
    assert t.atom("fp16", "mfma16x16x16").accumulators_per_lane(64) == 4
    fma = t.atom("fp32")
    assert (fma.m, fma.n, fma.k) == (8, 8, 1)                # 8x8 lanes of a wave64
    assert t.max_accumulators == 256
    assert t.max_grid_work_items == 2**32 - 1


def test_grid_limits():
    for t in PRESETS.values():
        assert t.max_grid == (2**31 - 1, 65535, 65535)


@pytest.mark.parametrize("name,arch", [("sm_90a", "sm_90"), ("SM_80", "sm_80"), ("GFX942", "gfx942"),
                                       ("gfx942:sramecc+:xnack-", "gfx942"), (" gfx90a ", "gfx90a")])
def test_get_target_aliases(name, arch):
    assert get_target(name).arch == arch


def test_get_target_unknown_names_known_ones():
    with pytest.raises(ValueError, match="unknown arch 'gfx1100'.*gfx942.*sm_90"):
        get_target("gfx1100")


@pytest.mark.parametrize("bad", [None, 942, 9.42, True, b"gfx942", ["gfx942"], {"arch": "gfx942"}])
def test_get_target_refuses_a_name_of_another_type_listing_the_presets(bad):
    """``get_target(None)`` was an AttributeError from ``None.split``."""
    known = ", ".join(sorted(PRESETS))
    with pytest.raises(TargetError, match=rf"^arch .*: allowed: an arch name: {known}$") as e:
        get_target(bad)
    assert e.value.value is bad and e.value.allowed == known and isinstance(e.value, ValueError)


def test_with_changes_one_field():
    t = get_target("gfx942").with_(lds_bytes=1024)
    assert t.lds_bytes == 1024 and t.arch == "gfx942"
    assert get_target("gfx942").lds_bytes == 64 * KIB


@pytest.mark.parametrize("arch,preset", [("sm_80", "sm_80"), ("sm_86", "sm_80"), ("sm_89", "sm_80"),
                                         ("sm_90", "sm_90"), ("sm_90a", "sm_90"), ("sm_100", "sm_90"),
                                         ("sm_120f", "sm_90")])
def test_from_device_nvidia(arch, preset):
    t = from_device("nvidia", arch, lds_bytes=101376, num_cus=84)
    base = get_target(preset)
    assert t.arch == arch
    assert t.lds_bytes == 101376 and t.num_cus == 84
    assert t.packed_bf16_atomics == base.packed_bf16_atomics
    assert t.wave_size == 32


@pytest.mark.parametrize("arch", ["sm_75", "sm_70", "turing", "sm_"])
def test_from_device_rejects(arch):
    with pytest.raises(ValueError):
        from_device("nvidia", arch)


def test_from_device_amd_and_vendor():
    t = from_device("amd", "gfx942:sramecc+:xnack-", max_threads=1024, num_cus=228)
    assert t.wave_size == 64 and t.num_cus == 228 and t.arch == "gfx942:sramecc+:xnack-"
    with pytest.raises(ValueError, match="unknown arch"):
        from_device("amd", "gfx1100")
    with pytest.raises(ValueError, match="vendor"):
        from_device("intel", "pvc")
