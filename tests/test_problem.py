"""ConvProblem: derived sizes, MIOpen problem keys (research miopen.md §2), flops, bytes."""

from __future__ import annotations

import re

import pytest

from miopen_solver.command import parse
from miopen_solver.problem import ConvProblem

NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"


def key(line: str) -> str:
    return parse(line).problem.problem_key()


def test_key_research_example_nhwc_fp16():
    # research §2: for direction B "in" is dY (K, Ho, Wo) and "out" is dX (C, Hi, Wi)
    assert key(f"convfp16 -n 32 -c 256 -H 56 -W 56 -k 64 -y 1 -x 1 -F 2 {NHWC}") == \
        "64-56-56-1x1-256-56-56-32-0x0-1x1-1x1-0-NHWC-NHWC-NHWC-FP16-B"


def test_key_of_issue_1946_problem_as_backward_data():
    # MIOpen #1946 logs the forward key 192-28-28-3x3-192-26-26-256-0x0-1x1-1x1-0-NHWC-NHWC-NHWC-FP32-F
    # (x: C=192 28x28 -> y: K=192 26x26, N=256). The same convolution's backward-data key
    # swaps the in/out groups (dY first) and ends in B.
    forward = "192-28-28-3x3-192-26-26-256-0x0-1x1-1x1-0-NHWC-NHWC-NHWC-FP32-F"
    f = forward.split("-")
    expected = "-".join(f[4:7] + [f[3]] + f[0:3] + f[7:-1] + ["B"])
    assert expected == "192-26-26-3x3-192-28-28-256-0x0-1x1-1x1-0-NHWC-NHWC-NHWC-FP32-B"
    assert key(f"conv -n 256 -c 192 -H 28 -W 28 -k 192 -y 3 -x 3 -F 2 {NHWC}") == expected


def test_key_nchw_is_a_single_token():
    # field order of MIOpen's comment example 576-4-4-1x1-192-4-4-8-1x1-2x2-3x3-0-NCHW-FP32-F
    p = ConvProblem(N=8, C=576, Hi=4, Wi=4, K=192, Y=1, X=1, pH=1, pW=1, sH=2, sW=2, dH=3, dW=3)
    assert (p.Ho, p.Wo) == (3, 3)
    assert p.problem_key() == "192-3-3-1x1-576-4-4-8-1x1-2x2-3x3-0-NCHW-FP32-B"


def test_key_mixed_layouts_print_all_three_dy_w_dx():
    # a perf-model line with only --out_layout NHWC: dY NHWC, W and dX NCHW
    assert key("convfp16 -n 256 -c 512 -H 7 -W 7 -k 512 -y 3 -x 3 -p 1 -q 1 -F 2 --out_layout NHWC") == \
        "512-7-7-3x3-512-7-7-256-1x1-1x1-1x1-0-NHWC-NCHW-NCHW-FP16-B"
    assert key("conv -n 1 -c 4 -k 4 -H 5 -W 5 -F 2 -I NHWC") == "4-3-3-3x3-4-5-5-1-0x0-1x1-1x1-0-NCHW-NCHW-NHWC-FP32-B"


def test_key_group_suffix():
    assert key("convbfp16 -n 32 -c 256 -H 28 -W 28 -k 256 -y 3 -x 3 -p 1 -q 1 -g 32 -F 2").endswith("-BF16-B_g32")
    assert "_g" not in key("conv -n 2 -F 2")


def test_key_non_square_everything():
    p = ConvProblem(N=3, C=6, Hi=11, Wi=9, K=4, Y=3, X=1, pH=2, pW=0, sH=2, sW=3, dH=2, dW=1, G=2,
                    dtype="bf16", in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    assert p.problem_key() == "4-6-3-3x1-6-11-9-3-2x0-2x3-2x1-0-NHWC-NHWC-NHWC-BF16-B_g2"


def test_key_3d():
    p = parse("conv -n 2 -c 2 --in_d 5 -H 4 -W 3 -k 3 --fil_d 5 -y 4 -x 3 --spatial_dim 3 -F 2").problem
    assert p.problem_key() == "3-1-1-1-5x4x3-2-5-4-3-2-0x0x0-1x1x1-1x1x1-0-NCDHW-FP32-B"


@pytest.mark.parametrize("Hi,Y,p,s,d,Ho", [(56, 3, 1, 1, 1, 56), (56, 3, 1, 2, 1, 28), (56, 1, 0, 2, 1, 28),
                                           (57, 1, 0, 2, 1, 29), (64, 3, 2, 1, 2, 64), (14, 4, 0, 3, 1, 4),
                                           (24, 5, 8, 1, 4, 24), (2, 1, 0, 2, 1, 1), (5, 5, 0, 1, 1, 1)])
def test_output_size(Hi, Y, p, s, d, Ho):
    prob = ConvProblem(N=1, C=1, Hi=Hi, Wi=Hi, K=1, Y=Y, X=Y, pH=p, pW=p, sH=s, sW=s, dH=d, dW=d)
    assert prob.Ho == Ho and prob.Wo == Ho


def test_output_size_below_one_raises():
    with pytest.raises(ValueError, match="Ho"):
        ConvProblem(N=1, C=1, Hi=2, Wi=8, K=1, Y=3, X=3)
    with pytest.raises(ValueError, match="Wo"):
        ConvProblem(N=1, C=1, Hi=8, Wi=4, K=1, Y=1, X=3, dW=2)


@pytest.mark.parametrize("kw,match", [(dict(G=3), "group"), (dict(N=0), "N"), (dict(sH=0), "sH"),
                                      (dict(pW=-1), "pW"), (dict(C=4, G=8), "group")])
def test_invalid_problems(kw, match):
    base = dict(N=1, C=6, Hi=8, Wi=8, K=4, Y=3, X=3)
    base.update(kw)
    with pytest.raises(ValueError, match=match):
        ConvProblem(**base)


def test_flops_match_miopen_issue_1206():
    # stats: bwdd-conv1x1u1, 32, 256, 1, 1, 256, 38, 38,  6056574976, ...
    p = parse("conv -n 32 -c 256 -H 38 -W 38 -k 256 -y 1 -x 1 -F 2").problem
    assert p.flops == 6056574976


def test_flops_grouped_and_main_line():
    p = parse(f"convfp16 -n 32 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2 {NHWC}").problem
    assert p.flops == 2 * 32 * 64 * 9 * 64 * 56 * 56
    g = parse("conv -n 2 -c 8 -k 12 -H 6 -W 6 -y 3 -x 3 -g 4 -F 2").problem
    assert g.flops == 2 * 2 * 8 * 9 * 12 * 4 * 4 // 4


def test_element_counts_and_bytes():
    p = ConvProblem(N=2, C=6, Hi=5, Wi=4, K=4, Y=3, X=1, pH=1, G=2, dtype="fp16")
    assert (p.Ho, p.Wo) == (5, 4)
    assert (p.cpg, p.kpg) == (3, 2)
    assert p.dx_elems == 2 * 6 * 5 * 4
    assert p.dy_elems == 2 * 4 * 5 * 4
    assert p.w_elems == 4 * 3 * 3 * 1
    assert p.elem_bytes == 2
    assert p.min_bytes == (240 + 160 + 36) * 2


def test_predicates():
    assert ConvProblem(N=1, C=2, Hi=4, Wi=4, K=2, Y=1, X=1).is_pointwise
    assert not ConvProblem(N=1, C=2, Hi=4, Wi=4, K=2, Y=1, X=1, sH=2).is_pointwise
    assert not ConvProblem(N=1, C=2, Hi=4, Wi=4, K=2, Y=1, X=1, pW=1).is_pointwise
    assert ConvProblem(N=1, C=4, Hi=4, Wi=4, K=4, Y=3, X=3, pH=1, pW=1, G=4).is_depthwise
    assert not ConvProblem(N=1, C=8, Hi=4, Wi=4, K=4, Y=3, X=3, pH=1, pW=1, G=4).is_depthwise
    assert ConvProblem(N=1, C=2, Hi=4, Wi=4, K=2, Y=1, X=1, in_layout="NHWC", out_layout="NHWC",
                       fil_layout="NHWC").all_nhwc


def test_replace_revalidates_and_dict_round_trip():
    p = ConvProblem(N=2, C=6, Hi=5, Wi=4, K=4, Y=3, X=1, pH=1, G=2)
    assert p.replace(N=3).N == 3
    with pytest.raises(ValueError):
        p.replace(G=4)
    assert ConvProblem.from_dict(p.as_dict()) == p
    assert p.short_tag() == "n2c6h5w4k4y3x1p1x0s1x1d1x1g2"


def test_miopen_db_key_is_the_x_joined_sqlite_row():
    """Issue 17 item 5: the ROCm 6.2+ text perf-db key of MIOpen's documented example
    (K = C = 1280, Ho = Wo = 4, 3x3 pad 1, N 8, NHWC fp16, backward data)."""
    from miopen_solver.command import parse
    p = parse("convfp16 -n 8 -c 1280 -H 4 -W 4 -k 1280 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -g 1 -F 2 "
              "--in_layout NHWC --out_layout NHWC --fil_layout NHWC").problem
    assert p.miopen_db_key() == "2x1280x4x4x1x3x3x1x1280x8x1x1x0x1x1x0x1x1x0x0x1xNHWCxFP16xB"
    # dY is MIOpen's "in" for direction B: in_channels = K, in_h/in_w = Ho/Wo; out_channels = C
    q = parse("conv -n 2 -c 6 -H 9 -W 7 -k 4 -y 3 -x 1 -p 0 -q 0 -u 2 -v 1 -g 2 -F 2").problem
    f = q.miopen_db_fields()
    assert (f["in_channels"], f["in_h"], f["in_w"], f["out_channels"]) == (4, 4, 7, 6)
    assert (f["group_count"], f["layout"], f["data_type"], f["direction"]) == (2, "NCHW", "FP32", "B")
    assert list(f)[:4] == ["spatial_dim", "in_channels", "in_h", "in_w"] and list(f)[-3:] == ["layout", "data_type", "direction"]


BASE = dict(N=2, C=8, Hi=6, Wi=6, K=8, Y=3, X=3, pH=1, pW=1, in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")


@pytest.mark.parametrize("name", ["N", "C", "Hi", "Wi", "K", "Y", "X", "pH", "pW", "sH", "sW", "dH", "dW", "G",
                                  "spatial_dim", "Di", "Z", "pD", "sD", "dD"])
def test_every_size_field_takes_ints_only(name):
    """A size, pad, stride, dilation, group or depth field that is not an int (a float even
    when whole, a bool, None, text) is one ValueError naming the field; numpy ints are
    taken and kept as Python ints (keys and hashes as for the int)."""
    import numpy as np
    for bad in (2.0, 2.5, True, None, "2", (2,)):
        with pytest.raises(ValueError, match=f"^{name} must be an int, got "):
            ConvProblem(**{**BASE, name: bad})
    good = 2 if name == "spatial_dim" else (1 if name in ("Y", "X", "G", "Di", "Z", "sD", "dD") else
                                            0 if name == "pD" else 2)
    p = ConvProblem(**{**BASE, name: np.int64(good)})
    assert type(getattr(p, name)) is int and p == ConvProblem(**{**BASE, name: good})


@pytest.mark.parametrize("name,value", [("Di", 7), ("Z", 5), ("pD", 1), ("sD", 2), ("dD", 3)])
def test_a_2d_problem_refuses_a_depth(name, value):
    """A 2-D problem has no depth: a depth field other than 1 (0 for pD) would enter its
    sizes, flops and bounds but not its key. Refused, naming the field, the value and what is
    allowed; the same field makes a 3-D problem."""
    from miopen_solver.problem import DEPTH_NONE
    with pytest.raises(ValueError, match=f"^{name} {value}: a 2-D problem \\(spatial_dim 2\\) has no depth; "
                                         f"allowed: {DEPTH_NONE[name]}, or spatial_dim 3$"):
        ConvProblem(**{**BASE, name: value})
    with pytest.raises(ValueError, match=f"^{name} {value}: a 2-D problem"):
        ConvProblem(**BASE).replace(**{name: value})
    three = ConvProblem(**{**BASE, "spatial_dim": 3, "in_layout": "NDHWC", "out_layout": "NDHWC",
                           "fil_layout": "NDHWC", "Di": 8, "Z": 3, name: value})
    assert getattr(three, name) == value and three.is_3d


def test_the_other_fields_say_what_is_allowed():
    cases = [(dict(dtype="fp64"), "dtype 'fp64'; allowed: fp32, fp16, bf16, int8, fp8, bf8"),
             (dict(in_layout=None), re.escape("in_layout None (NoneType): allowed: the letters NCHW or NCDHW, "
                                              "each once, in any order and case (e.g. NCHW, NHWC, CHWN, NCDHW, NDHWC)")),
             (dict(fil_layout=""), "fil_layout '': allowed: the letters NCHW or NCDHW"),
             (dict(mode="foo"), "mode 'foo'; allowed: conv, trans"),
             (dict(mode="trans", trans_pads=(0,)), r"trans_pads must be 3 ints \(output pads along D, H, W\)"),
             (dict(trans_pads=(0, 0, 0.5)), "trans_pads must be 3 ints"),
             (dict(spatial_dim=4), "spatial_dim must be 2 or 3, got 4"),
             (dict(Di=-5), "Di must be >= 1, got -5"), (dict(Z=0), "Z must be >= 1, got 0"),
             (dict(sD=0), "sD must be >= 1, got 0"), (dict(pD=-1), "pD must be >= 0, got -1")]
    for kw, says in cases:
        with pytest.raises(ValueError, match=says):
            ConvProblem(**{**BASE, **kw})
    assert ConvProblem(**{**BASE, "trans_pads": [0, 0, 0]}).trans_pads == (0, 0, 0)


@pytest.mark.parametrize("field", ["N", "C", "Hi", "Wi", "K", "Y", "X", "pH", "sH", "dW", "G", "Di"])
@pytest.mark.parametrize("value", [2**31, -2**31 - 1, 2**61 - 1, 10**5000], ids=["2^31", "-2^31-1", "2^61-1", "10^5000"])
def test_every_integer_field_stays_in_a_c_int(field, value):
    """The library API is bounded as the command line is (MIOpenDriver reads every flag into a
    C int): a field outside it is refused naming the field (work downstream grew with such a
    value's size; a 5000-digit one also broke Python's own int-to-text conversion)."""
    kw = dict(N=1, C=1, Hi=1, Wi=1, K=1, Y=1, X=1)
    kw[field] = value
    with pytest.raises(ValueError, match=f"^{field} .* is outside a 32-bit int; allowed: -2147483648 to 2147483647$"):
        ConvProblem(**kw)
    with pytest.raises(ValueError, match="trans_pads must be 3 ints .output pads along D, H, W., each a C int"):
        ConvProblem(N=1, C=1, Hi=1, Wi=1, K=1, Y=1, X=1, trans_pads=(value, 0, 0))
