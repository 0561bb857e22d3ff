"""Applicability: every reason code, all reasons at once, and the verdict of every command
line in tests/data/commands.txt (bench suite + research lines) for gfx942, sm_90 and cpu."""

import json
import re
from pathlib import Path

import pytest

from miopen_solver import applicability as ap
from miopen_solver.command import parse
from miopen_solver.problem import ConvProblem
from miopen_solver.target import PRESETS, get_target

DATA = Path(__file__).parent / "data" / "commands.txt"
_LINE = re.compile(r"^(?P<cmd>.*?)\s+#\s+(?P<label>\S+)\s+\|\s+gpu=(?P<gpu>\S+)\s+cpu=(?P<cpu>\S+)\s*$")


def load_commands():
    """``[(label, command, {"gpu": codes, "cpu": codes})]`` from tests/data/commands.txt;
    codes is a tuple of reason codes, empty for applicable."""
    out = []
    for raw in DATA.read_text().splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        m = _LINE.match(raw)
        assert m, f"malformed data line: {raw}"
        codes = {k: () if m[k] == "ok" else tuple(m[k].split("+")) for k in ("gpu", "cpu")}
        out.append((m["label"], m["cmd"], codes))
    return out


COMMANDS = load_commands()
TARGETS = ("gfx942", "sm_90", "cpu")


def expected_codes(codes, arch):
    return codes["cpu" if arch == "cpu" else "gpu"]


def nhwc(**kw):
    base = dict(N=2, C=32, Hi=10, Wi=10, K=32, Y=3, X=3, pH=1, pW=1, dtype="fp16",
                in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    base.update(kw)
    return ConvProblem(**base)


GFX942, SM90, CPU = get_target("gfx942"), get_target("sm_90"), get_target("cpu")


def test_data_file_covers_the_suite_and_the_research_lines():
    labels = [label for label, _, _ in COMMANDS]
    assert len(labels) == len(set(labels))
    assert sum(1 for lab in labels if lab.startswith("s5_")) == 39
    assert sum(1 for lab in labels if not lab.startswith(("s5_", "x_"))) == 14


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("label,cmd,codes", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_command_verdicts(label, cmd, codes, arch):
    dc = parse(cmd, allow_any_direction=True)
    v = ap.is_applicable(dc.problem, get_target(arch), forw=dc.flags["forw"])
    assert v.codes == expected_codes(codes, arch)
    assert v.ok == (not v.codes)
    assert all(r.message for r in v.reasons)


# ------------------------------------------------------------------ each code
def test_applicable_problem():
    for arch in PRESETS:
        v = ap.is_applicable(nhwc(), get_target(arch))
        assert v.ok and bool(v) and v.reasons == () and v.notes == ()


@pytest.mark.parametrize("forw,words", [(1, "forward"), (4, "backward weights"), (0, "forward, backward data"),
                                        (3, "forward and backward data"), (8, "no direction")])
def test_direction(forw, words):
    v = ap.is_applicable(nhwc(), GFX942, forw=forw)
    assert v.codes == ("DIRECTION",)
    assert f"-F {forw} asks for" in v.reasons[0].message and words in v.reasons[0].message


def test_transposed_mode_is_its_own_code():
    v = ap.is_applicable(nhwc(mode="trans"), SM90)
    assert v.codes == ("TRANSPOSED_MODE",)
    assert "Direction::Forward" in v.reasons[0].message


@pytest.mark.parametrize("dtype", ["int8", "fp8", "bf8"])
def test_dtype(dtype):
    v = ap.is_applicable(nhwc(dtype=dtype), SM90)
    assert v.codes == ("DTYPE",) and "supported: fp32, fp16, bf16" in v.reasons[0].message


def test_dtype_without_an_atom_on_the_target():
    t = SM90.with_(atoms={"fp32": SM90.atoms_for("fp32")})
    v = ap.is_applicable(nhwc(dtype="bf16"), t)
    assert v.codes == ("DTYPE",) and "sm_90 has no matrix atom for bf16" == v.reasons[0].message
    assert ap.is_applicable(nhwc(dtype="fp32"), t).ok


@pytest.mark.parametrize("layouts,gpu_ok,cpu_ok", [
    (("NHWC", "NHWC", "NHWC"), True, True),
    (("NCHW", "NCHW", "NCHW"), True, True),
    (("NHWC", "NCHW", "NHWC"), True, True),
    (("NCHW", "NHWC", "NHWC"), True, True),
    (("NHWC", "NHWC", "NCHW"), True, True),
    (("CHWN", "CHWN", "CHWN"), False, False),
    (("NHWC", "CHWN", "NHWC"), False, False),
    (("NCHW", "NCHW", "HWNC"), False, False),
])
def test_layout_policy(layouts, gpu_ok, cpu_ok):
    p = nhwc(in_layout=layouts[0], out_layout=layouts[1], fil_layout=layouts[2])
    for arch in ("gfx90a", "gfx942", "gfx950", "sm_80", "sm_90"):
        v = ap.is_applicable(p, get_target(arch))
        assert v.ok is gpu_ok and v.codes == (() if gpu_ok else ("LAYOUT",))
    v = ap.is_applicable(p, CPU)
    assert v.ok is cpu_ok and v.codes == (() if cpu_ok else ("LAYOUT",))


def test_layout_messages_say_why():
    """The reason names each tensor whose order is neither NCHW nor NHWC, and only those."""
    for t in (GFX942, CPU):
        one = ap.is_applicable(nhwc(out_layout="CHWN"), t).reasons[0]
        assert "dY (out_layout) CHWN" in one.message and "dX" not in one.message
        assert "must be NCHW or NHWC in memory" in one.message
    two = ap.is_applicable(nhwc(in_layout="CHWN", fil_layout="CHWN", out_layout="NCHW"), SM90).reasons[0]
    assert "dX (in_layout) CHWN, W (fil_layout) CHWN:" in two.message and "dY" not in two.message
    # a CHWN dX of N = 1, C = 1 has the bytes of NHWC: judged by its bytes, applicable
    assert ap.is_applicable(nhwc(N=1, C=1, K=1, Y=1, X=1, pH=0, pW=0, in_layout="CHWN"), SM90).ok


def test_spatial_dim():
    p3 = ConvProblem(N=1, C=8, Hi=4, Wi=4, K=8, Y=1, X=1, spatial_dim=3, Di=4, Z=1, dtype="fp16",
                     in_layout="NDHWC", out_layout="NDHWC", fil_layout="NDHWC")
    assert ap.is_applicable(p3, GFX942).codes == ("SPATIAL_DIM",)
    ncdhw = p3.replace(in_layout="NCDHW", out_layout="NCDHW", fil_layout="NCDHW")
    assert ap.is_applicable(ncdhw, GFX942).codes == ("SPATIAL_DIM",)
    assert ap.is_applicable(ncdhw, CPU).codes == ("SPATIAL_DIM",)
    mixed = p3.replace(in_layout="NCDHW")
    assert ap.is_applicable(mixed, GFX942).codes == ("LAYOUT", "SPATIAL_DIM")


def test_index_overflow_boundary():
    # fp16 1x1 over N*H*W rows with C = K = 1: dY and dX hold N*H*W elements of 2 bytes.
    # 2^30 - 1 elements = 2^31 - 2 bytes fits; 2^30 elements = 2^31 bytes does not.
    fits = nhwc(N=1, C=1, K=1, Hi=1, Wi=2**30 - 1, Y=1, X=1, pH=0, pW=0)
    over = fits.replace(Wi=2**30)
    assert ap.check(fits, GFX942).ok                 # structural guards only: no decomposition
    v = ap.check(over, GFX942)
    assert v.codes == ("INDEX_OVERFLOW",)
    msg = v.reasons[0].message
    assert "dY of one image is 2147483648 bytes (1073741824 elements: K*Ho*Wo, from -k, -H/-W," in msg
    assert "dX of one image is 2147483648 bytes (1073741824 elements: C*Hi*Wi, from -c, -H/-W)" in msg
    assert "past 2147483647 bytes (2^31-1)" in msg and "no split along N helps" in msg and "W is" not in msg
    # fp32: 2^29 elements = 2^31 bytes already overflows.
    assert ap.check(fits.replace(Wi=2**29, dtype="fp32"), SM90).codes == ("INDEX_OVERFLOW",)
    big_w = nhwc(C=2**16, K=2**15, Y=1, X=1, pH=0, pW=0, Hi=1, Wi=1, N=1)   # W: 2^31 elements
    assert "W is 4294967296 bytes (2147483648 elements: K*(C/G)*Y*X, from -k, -c, -g, -y/-x)" in \
        ap.check(big_w, SM90).reasons[0].message


def test_no_valid_config():
    tiny = GFX942.with_(lds_bytes=256)
    v = ap.is_applicable(nhwc(), tiny)
    assert v.codes == ("NO_VALID_CONFIG",)
    assert "no default config is valid" in v.reasons[0].message and "shared memory exceed" in v.reasons[0].message
    # Only asked once the structural guards pass: a CHWN problem reports LAYOUT alone.
    assert ap.is_applicable(nhwc(in_layout="CHWN", out_layout="CHWN", fil_layout="CHWN"), tiny).codes == ("LAYOUT",)


def test_every_reason_is_reported():
    p = ConvProblem(N=1, C=8, Hi=4, Wi=4, K=8, Y=1, X=1, spatial_dim=3, Di=4, Z=1, dtype="int8", mode="trans",
                    in_layout="NCDHW", out_layout="NDHWC", fil_layout="NCDHW")
    v = ap.is_applicable(p, SM90, forw=5)
    assert v.codes == ("TRANSPOSED_MODE", "DIRECTION", "DTYPE", "LAYOUT", "SPATIAL_DIM")
    assert set(v.codes) <= set(ap.REASON_CODES)


def test_depthwise_is_applicable_with_a_note():
    """Depthwise is applicable everywhere; the note says it runs as thin GEMMs, which is true
    except on NVIDIA targets, whose default runs it on the direct schedule (no note)."""
    dw = nhwc(C=32, K=32, G=32)
    for t in (GFX942, CPU):
        v = ap.is_applicable(dw, t)
        assert v.ok and v.notes and v.notes[0].code == "DEPTHWISE"
        assert "GemmN=1" in v.notes[0].message
    assert ap.is_applicable(dw, SM90).ok and not ap.is_applicable(dw, SM90).notes
    assert not ap.is_applicable(nhwc(C=64, K=32, G=32), SM90).notes      # cpg 2: not depthwise
    assert not ap.is_applicable(nhwc(C=1, K=1), SM90).notes              # G = 1


def test_verdict_as_dict_and_str():
    v = ap.is_applicable(nhwc(out_layout="CHWN"), GFX942, forw=1)
    d = v.as_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["applicable"] is False and [r["code"] for r in d["reasons"]] == ["DIRECTION", "LAYOUT"]
    assert str(v.reasons[0]).startswith("DIRECTION: -F 1")


def test_not_applicable_error_carries_the_verdict():
    v = ap.is_applicable(nhwc(dtype="int8"), GFX942)
    e = ap.NotApplicableError(v)
    assert e.verdict is v and "DTYPE" in str(e) and isinstance(e, ValueError)
