"""MIOpenDriver command-line parsing (miopen_solver.command).

Expected values come from MIOpen's flag table (research miopen.md §1.3, ConvDriver::
AddCmdLineArgs), written out here independently of the parser's own FLAGS table.
"""

from __future__ import annotations

import re

import pytest

from miopen_solver.command import FLAGS, describe_directions, format_command, parse
from miopen_solver.errors import MiopenCommandError
from miopen_solver.problem import ConvProblem

# short, long, MIOpen default (verbatim from ConvDriver::AddCmdLineArgs; ints as ints)
MIOPEN_FLAGS = [
    ("I", "in_layout", ""), ("O", "out_layout", ""), ("f", "fil_layout", ""),
    ("_", "spatial_dim", 2), ("F", "forw", 0), ("n", "batchsize", 100), ("c", "in_channels", 3),
    ("!", "in_d", 32), ("H", "in_h", 32), ("W", "in_w", 32), ("k", "out_channels", 32),
    ("@", "fil_d", 3), ("y", "fil_h", 3), ("x", "fil_w", 3), ("#", "conv_stride_d", 1),
    ("u", "conv_stride_h", 1), ("v", "conv_stride_w", 1), ("$", "pad_d", 0), ("p", "pad_h", 0),
    ("q", "pad_w", 0), ("r", "pad_val", 0), ("%", "trans_output_pad_d", 0),
    ("Y", "trans_output_pad_h", 0), ("X", "trans_output_pad_w", 0), ("i", "iter", 10),
    ("V", "verify", 1), ("C", "verification_cache", ""), ("t", "time", 0), ("w", "wall", 0),
    ("s", "search", 0), ("P", "printconv", 1), ("o", "dump_output", 0), ("d", "in_data", ""),
    ("e", "weights", ""), ("b", "bias", ""), ("m", "mode", "conv"), ("z", "pad_mode", "default"),
    ("Z", "tensor_vect", 0), ("L", "vector_length", 1), ("^", "dilation_d", 1),
    ("l", "dilation_h", 1), ("j", "dilation_w", 1), ("a", "in_bias", ""), ("g", "group_count", 1),
    ("D", "dout_data", ""), ("S", "solution", "-1"), ("G", "gpualloc", 0),
    ("U", "in_cast_type", "-1"), ("T", "out_cast_type", "-1"), ("R", "wei_cast_type", "-1"),
    # newer MIOpen (rocm-libraries)
    ("N", "init_output_nan", 0), ("&", "tuning_policy", 0), ("M", "math_type", 1),
    ("~", "gpubuffer_check", 0), ("J", "use_hip_graph", 0),
]

# A value different from the default for every flag, valid on top of BASE.
BASE = "conv -F 2 -c 6 -k 12"
TEST_VALUES = {
    "in_layout": ("NHWC", "NHWC"), "out_layout": ("NHWC", "NHWC"), "fil_layout": ("NHWC", "NHWC"),
    "spatial_dim": ("3", 3), "forw": ("2", 2), "batchsize": ("7", 7), "in_channels": ("9", 9),
    "in_d": ("5", 5), "in_h": ("20", 20), "in_w": ("21", 21), "out_channels": ("15", 15),
    "fil_d": ("2", 2), "fil_h": ("5", 5), "fil_w": ("1", 1), "conv_stride_d": ("2", 2),
    "conv_stride_h": ("2", 2), "conv_stride_w": ("3", 3), "pad_d": ("1", 1), "pad_h": ("2", 2),
    "pad_w": ("1", 1), "pad_val": ("4", 4), "trans_output_pad_d": ("1", 1),
    "trans_output_pad_h": ("1", 1), "trans_output_pad_w": ("1", 1), "iter": ("5", 5),
    "verify": ("0", 0), "verification_cache": ("/tmp/cache", "/tmp/cache"), "time": ("1", 1),
    "wall": ("2", 2), "search": ("1", 1), "printconv": ("0", 0), "dump_output": ("1", 1),
    "in_data": ("x.bin", "x.bin"), "weights": ("w.bin", "w.bin"), "bias": ("1", "1"),
    "mode": ("trans", "trans"), "pad_mode": ("valid", "valid"), "tensor_vect": ("1", 1),
    "vector_length": ("4", 4), "dilation_d": ("2", 2), "dilation_h": ("2", 2),
    "dilation_w": ("3", 3), "in_bias": ("b.bin", "b.bin"), "group_count": ("3", 3),
    "dout_data": ("dy.bin", "dy.bin"), "solution": ("ConvHipImplicitGemmBwdXdlops", "ConvHipImplicitGemmBwdXdlops"),
    "gpualloc": ("1", 1), "in_cast_type": ("fp16", "fp16"), "out_cast_type": ("bf16", "bf16"),
    "wei_cast_type": ("fp8", "fp8"), "init_output_nan": ("1", 1), "tuning_policy": ("2", 2),
    "math_type": ("0", 0), "gpubuffer_check": ("1", 1), "use_hip_graph": ("1", 1),
}


def err(line) -> MiopenCommandError:
    with pytest.raises(MiopenCommandError) as info:
        parse(line)
    return info.value


LINE_ALLOWED = r"allowed: a command line \(str\) or its tokens \(a list or tuple of str\)$"


@pytest.mark.parametrize("argv,shown", [
    (None, "None (NoneType)"), (b"convfp16 -n 2 -F 2", "b'convfp16 -n 2 -F 2' (bytes)"),
    (bytearray(b"conv"), "bytearray(b'conv') (bytearray)"), (5, "5"), ({"base": "conv"}, "{'base': 'conv'} (dict)"),
    (iter(["conv"]), "(list_iterator)"),
])
def test_parse_refuses_argv_that_is_neither_text_nor_tokens(argv, shown):
    """``parse(None)`` was a TypeError from iterating None; ``parse(b"...")`` iterated the
    bytes' ints and complained about a base argument '99'."""
    e = err(argv)
    assert e.flag == "argv" and str(e).startswith("argv: got ") and shown in str(e)
    assert re.search(LINE_ALLOWED, str(e)) and "\n" not in str(e)


@pytest.mark.parametrize("tokens,index", [(["conv", None], 1), ([b"conv", "-F", "2"], 0), (("conv", "-F", 2), 2),
                                          (["conv", "-F", "2", 1.5], 3)])
def test_parse_refuses_a_token_that_is_not_text_naming_its_index(tokens, index):
    e = err(tokens)
    assert e.flag == f"argv[{index}]" and re.search(LINE_ALLOWED, str(e))


def test_parse_takes_a_tuple_of_tokens_as_a_list():
    line = "conv -n 2 -c 8 -H 5 -W 5 -k 8 -y 3 -x 3 -F 2"
    assert parse(tuple(line.split())).problem == parse(line.split()).problem == parse(line).problem


def test_flag_table_is_miopens():
    assert [(f.short, f.long) for f in FLAGS] == [(s, lg) for s, lg, _ in MIOPEN_FLAGS]


def test_defaults_are_miopens():
    cmd = parse("conv -F 2")
    for _, long, default in MIOPEN_FLAGS:
        want = 2 if long == "forw" else default
        assert cmd.flags[long] == want, long
    p = cmd.problem
    assert (p.N, p.C, p.Hi, p.Wi, p.K, p.Y, p.X) == (100, 3, 32, 32, 32, 3, 3)
    assert (p.pH, p.pW, p.sH, p.sW, p.dH, p.dW, p.G) == (0, 0, 1, 1, 1, 1, 1)
    assert (p.in_layout, p.out_layout, p.fil_layout) == ("NCHW",) * 3     # "" -> NCHW
    assert p.dtype == "fp32" and p.spatial_dim == 2 and p.mode == "conv"
    assert (cmd.iters, cmd.verify, cmd.time, cmd.wall, cmd.solution) == (10, 1, 0, 0, "-1")


@pytest.mark.parametrize("short,long,_default", MIOPEN_FLAGS)
@pytest.mark.parametrize("form", ["short", "long"])
def test_every_flag_short_and_long(short, long, _default, form):
    raw, want = TEST_VALUES[long]
    flag = f"-{short}" if form == "short" else f"--{long}"
    extra = []
    if long in ("spatial_dim",):
        extra = ["-I", "NCDHW", "-O", "NCDHW", "-f", "NCDHW"]
    cmd = parse(BASE.split() + [flag, raw] + extra)
    assert cmd.flags[long] == want


def test_flags_reach_the_problem():
    cmd = parse("convfp16 -F 2 -n 7 -c 6 -H 20 -W 21 -k 12 -y 5 -x 1 -p 2 -q 1 -u 2 -v 3 -l 2 -j 3 "
                "-g 3 -I NHWC -O NHWC -f NHWC")
    assert cmd.problem == ConvProblem(N=7, C=6, Hi=20, Wi=21, K=12, Y=5, X=1, pH=2, pW=1, sH=2, sW=3,
                                      dH=2, dW=3, G=3, dtype="fp16", in_layout="NHWC",
                                      out_layout="NHWC", fil_layout="NHWC")


def test_last_repeat_wins():
    assert parse("conv -F 2 -n 4 -n 8").problem.N == 8
    assert parse("conv -F 2 -n 4 --batchsize 9").problem.N == 9
    assert parse("conv -F 2 --batchsize 9 -n 4").problem.N == 4
    assert parse("conv -F 1 -F 2").flags["forw"] == 2


@pytest.mark.parametrize("flag", ["-I", "--in_layout", "-O", "--out_layout", "-f", "--fil_layout"])
@pytest.mark.parametrize("value", ["nhwc", "Nhwc", "nHwC"])
def test_lowercase_layouts_accepted_in_both_forms(flag, value):
    # MIOpen upper-cases only long-form layout values, so `-I nhwc` fails there
    # ("Invalid Layout Parameter Value", issues #1235/#1311). We are kinder: any case, any form.
    cmd = parse(f"conv -F 2 {flag} {value}")
    long = {"-I": "in_layout", "-O": "out_layout", "-f": "fil_layout"}.get(flag, flag[2:])
    assert cmd.flags[long] == "NHWC"


def test_layouts_default_independently():
    p = parse("conv -F 2 --out_layout NHWC").problem    # perf-model lines do exactly this
    assert (p.in_layout, p.out_layout, p.fil_layout) == ("NCHW", "NHWC", "NCHW")


@pytest.mark.parametrize("flag", ["-I", "--in_layout", "-O", "--out_layout", "-f", "--fil_layout"])
def test_an_empty_layout_is_the_default_as_in_miopendriver(flag):
    """MIOpenDriver's layout flags default to "" (its help says so, and ours), read as
    NCHW, or NCDHW for a 3-D line: an explicit empty value is that default, not an error."""
    two = parse(["conv", "-F", "2", "--out_layout", "NHWC", flag, ""]).problem
    named = {"-I": "in_layout", "-O": "out_layout", "-f": "fil_layout"}.get(flag, flag[2:])
    assert getattr(two, named) == "NCHW"
    three = parse(["conv", "-F", "2", "--spatial_dim", "3", flag, ""]).problem
    assert getattr(three, named) == "NCDHW" and three.is_3d


@pytest.mark.parametrize("value", ["NCWH", "HWCN", "nchw4", " ", "NC"])
def test_unknown_layout(value):
    e = err(["conv", "-F", "2", "-I", value])
    assert e.flag == "-I" and e.value == value and "NHWC" in e.allowed


@pytest.mark.parametrize("forw,words", [
    (0, "forward, backward data and backward weights"),
    (1, "forward"), (3, "forward and backward data"), (4, "backward weights"),
    (5, "forward and backward weights"), (6, "backward data and backward weights"),
    (7, "forward, backward data and backward weights"), (8, "no direction at all"),
    (10, "backward data (bits 8 and up select nothing)"), (-2, "negative"),
])
def test_forw_bitmask_only_2(forw, words):
    e = err(f"conv -n 2 -F {forw}")
    assert e.flag == "-F" and e.value == str(forw)
    assert "exactly 2" in e.allowed and words in str(e)
    assert words in describe_directions(forw)


def test_forw_missing_means_all_directions():
    e = err("conv -n 2")              # MIOpen's default -F 0 runs all three directions
    assert "forward, backward data and backward weights" in str(e)


def test_forw_error_names_the_flag_as_written():
    assert err("conv --forw 1").flag == "--forw"


def test_allow_any_direction():
    assert parse("conv -F 1", allow_any_direction=True).flags["forw"] == 1


@pytest.mark.parametrize("line,flag", [
    ("conv -F 2 -K 3", "-K"), ("conv -F 2 -? 3", "-?"), ("conv -F 2 --nope 1", "--nope"),
    ("conv -F 2 --batch 5", "--batch"),               # no prefix abbreviation
    ("conv -F 2 -h", "-h"), ("conv -F 2 --help", "--help"),
])
def test_unknown_flags(line, flag):
    e = err(line)
    assert e.flag == flag
    assert ("help is not a command" if flag in ("-h", "--help", "-?") else "unknown flag") in str(e)


@pytest.mark.parametrize("line,flag", [
    ("conv -F 2 -n16", "-n16"),                      # value must be the next token
    ("conv -F 2 16", "16"),                           # stray value
    ("conv -F 2 --batchsize=16", "--batchsize=16"),   # MIOpen has no --name=value
])
def test_malformed_tokens(line, flag):
    e = err(line)
    assert e.flag == flag


@pytest.mark.parametrize("line,flag", [("conv -F 2 -n", "-n"), ("conv -F 2 --in_h", "--in_h"),
                                       ("conv -F", "-F"), ("conv -F 2 -I", "-I"),
                                       # a flag where the value is due: the value is missing
                                       ("conv -F 2 -n -c 16", "-n"), ("conv -F 2 --in_h --in_w 8", "--in_h"),
                                       ("conv -n 1 -F -V 0", "-F"), ("conv -F 2 -I --in_layout NHWC", "-I")])
def test_missing_value(line, flag):
    e = err(line)
    assert e.flag == flag and e.value is None and "missing value" in str(e)


@pytest.mark.parametrize("value", ["abc", "1.5", "0x10", "1_000", " 5", "5 ", "", "١٢", "12abc", "+", "-"])
@pytest.mark.parametrize("flag", ["-n", "-F", "--pad_h", "-g", "-i"])
def test_non_integer_values(flag, value):
    e = err(["conv", "-F", "2", flag, value])
    own = {"-F": "exactly 2 (backward data)", "-i": "an integer from 1 to 100000 (timed launches)"}   # own rules
    assert e.flag == flag and e.value == value and e.allowed == own.get(flag, "an integer")


def test_signed_integers_parse():
    assert parse("conv -F 2 -S -1").solution == "-1"
    assert parse("conv -F 2 -n +4").problem.N == 4


@pytest.mark.parametrize("value", ["0", "-1"])
def test_iter_must_be_positive(value):
    e = err(f"conv -F 2 -i {value}")
    assert e.flag == "-i" and "from 1 to" in e.allowed


@pytest.mark.parametrize("line,flag", [("conv -F 2 -V 2", "-V"), ("conv -F 2 -t 5", "-t"),
                                       ("conv -F 2 -s 2", "-s"), ("conv -F 2 -s -1", "-s"),
                                       ("conv -F 2 --search 5", "--search"),
                                       ("conv -F 2 -w 3", "-w"), ("conv -F 2 --spatial_dim 4", "--spatial_dim"),
                                       ("conv -F 2 -_ 1", "-_")])
def test_option_ranges(line, flag):
    assert err(line).flag == flag


# How MIOpenDriver reads each int flag that is not a size (conv_driver.hpp, main.cpp, the Driver
# base class; rocm-libraries 07647551), written out here independently of FLAGS' values:
SWITCHES = {"V": "verify", "t": "time", "s": "search", "o": "dump_output", "b": "bias", "G": "gpualloc",
            "N": "init_output_nan", "J": "use_hip_graph"}
"""On as ``== 1`` (-V -s -G -N) or ``!= 0`` (-t -o -b -J): 0/1 switches, anything else refused."""
CODED = {"w": ("wall", 2), "~": ("gpubuffer_check", 2), "M": ("math_type", 1), "_": ("spatial_dim", 3)}
"""Flags with codes 0..N (-w off/on/warm-up, -~ none/front/back, -M, -_ 2 or 3)."""
FREE = {"r": "pad_val", "%": "trans_output_pad_d", "Y": "trans_output_pad_h", "X": "trans_output_pad_w",
        "P": "printconv", "&": "tuning_policy"}
"""Any 32-bit int: unused by the conv driver (-P), cache names only (-r), the tuning policy (-&),
-m trans only (-% -Y -X; trans is refused). They change nothing here."""


def test_the_switches_are_miopens():
    assert {f.short for f in FLAGS if f.values == (0, 1)} == set(SWITCHES)
    assert {f.short: f.values for f in FLAGS if f.values and f.values != (0, 1)} == {"w": (0, 1, 2),
                                                                                    "~": (0, 1, 2)}


@pytest.mark.parametrize("short,long", sorted(SWITCHES.items()))
@pytest.mark.parametrize("form", ["short", "long"])
def test_every_switch_takes_only_0_or_1(capsys, no_workers, short, long, form):
    """-J 2, -o 2, -b 2 were accepted (as on, silently or with an Info line about '1') while
    -V 2, -t 5, -s 2 were refused: every 0/1 switch now refuses other values with -V's line."""
    from conftest import run_cli
    flag = f"-{short}" if form == "short" else f"--{long}"
    for bad in ("2", "-1", "5", "2147483647", "-2147483648", "0002"):
        assert str(err(["conv", "-F", "2", flag, bad])) == f"{flag} {bad!r}: allowed: 0 or 1"
        status, out, lines = run_cli(capsys, "config", "convfp16", "-n", "1", "-c", "8", "-H", "4", "-W", "4", "-k",
                                     "8", "-y", "1", "-x", "1", "-F", "2", flag, bad)
        assert status == 2 and out == [] and lines == [f"dgrad-driver: error: {flag} {bad!r}: allowed: 0 or 1"]
    for good, value in (("0", 0), ("1", 1), ("00", 0), ("-0", 0), ("+1", 1)):
        got = parse(["conv", "-F", "2", "-V", "0", flag, good]).flags[long]
        assert (int(got) if short == "b" else got) == value


@pytest.mark.parametrize("short,spec", sorted(CODED.items()))
def test_coded_flags_take_only_their_codes(short, spec):
    long, top = spec
    low = 2 if short == "_" else 0
    allowed = " or ".join(map(str, range(low, top + 1))) if top - low == 1 else "0, 1 or 2"
    for bad in (str(top + 1), str(low - 1), "2147483647"):
        e = err(["conv", "-F", "2", f"-{short}", bad])
        assert e.flag == f"-{short}" and (allowed in str(e) or short == "M"), str(e)
    for good in range(low, top + 1):
        assert parse(["conv", "-F", "2", f"-{short}", str(good)]).flags[long] == good


@pytest.mark.parametrize("short,long", sorted(FREE.items()))
def test_free_int_flags_take_any_32_bit_int(short, long):
    for value in (-2147483648, -1, 0, 7, 2147483647):
        assert parse(["conv", "-F", "2", f"-{short}", str(value)]).flags[long] == value
    assert err(["conv", "-F", "2", f"-{short}", "2147483648"]).flag == f"-{short}"


@pytest.mark.parametrize("value,on", [("1", True), ("01", True), ("0", False), ("00", False),
                                      ("+0", False), ("-0", False), ("", False)])
def test_bias_is_on_as_miopen_reads_it(value, on):
    """``-b`` is an int flag in MIOpenDriver (``GetValueInt("bias") != 0``, default ""):
    ``-b 00`` is off there; we took any text but "" and "0" as on (an Info line, and the
    bias buffer's random numbers shifting W's against MIOpenDriver's). It is a switch: values
    other than 0 and 1 are refused (test_every_switch_takes_only_0_or_1)."""
    cmd = parse(["conv", "-F", "2", "-b", value])
    assert cmd.bias is on and parse("conv -F 2").bias is False


@pytest.mark.parametrize("value", ["abc", "1.5", "1abc", "0x1", "99999999999"])
def test_bias_must_be_an_integer(value):
    e = err(["conv", "-F", "2", "-b", value])
    assert e.flag == "-b" and "an integer" in str(e)


@pytest.mark.parametrize("line", ["conv -F 2 -c 6 -k 4 -g 4", "conv -F 2 -c 6 -k 10 -g 3",
                                  "conv -F 2 -c 4 -k 8 -g 8"])
def test_bad_group_count(line):
    e = err(line)
    assert e.flag in ("-g", "--group_count")


@pytest.mark.parametrize("value", ["0", "-2", "-2147483648"])
def test_group_count_below_one_is_one_as_miopendriver_reads_it(value):
    """MIOpenDriver reads the group count as ``std::max(group_count, 1)`` (conv_driver.hpp):
    -g 0 and negative counts are an ungrouped problem, keyed and run as -g 1."""
    p = parse(f"conv -F 2 -c 4 -k 6 -H 5 -W 5 -g {value}").problem
    assert p.G == 1 and p == parse("conv -F 2 -c 4 -k 6 -H 5 -W 5 -g 1").problem


@pytest.mark.parametrize("line,flag,axis", [
    ("conv -F 2 -H 2 -y 5", "-H", "Ho"), ("conv -F 2 -W 2 -x 5", "-W", "Wo"),
    ("conv -F 2 --in_h 4 -y 3 -l 2", "--in_h", "Ho"),     # dilated filter spans 5 rows
    ("conv -F 2 -H 1 -W 5 -y 3 -p 0", "-H", "Ho"),
    # MIOpen's division toward zero gives 1 here ((2 - 3)/2 + 1); the window still overruns
    ("conv -F 2 -H 2 -W 5 -y 3 -u 2", "-H", "Ho"), ("conv -F 2 -H 5 -W 5 -x 7 -v 4", "-W", "Wo"),
])
def test_output_size_below_one_is_an_error(line, flag, axis):
    e = err(line)             # MIOpen runs Ho = 1 with the window past the input; we refuse
    assert e.flag == flag and f"derived {axis}=" in str(e)
    assert "dilated filter that fits the padded input" in str(e)


def test_output_size_exactly_one_is_fine():
    p = parse("conv -F 2 -H 3 -W 3 -y 3 -x 3").problem
    assert (p.Ho, p.Wo) == (1, 1)


@pytest.mark.parametrize("line,flag", [
    ("conv -F 2 -n 0", "-n"), ("conv -F 2 -c 0", "-c"), ("conv -F 2 -k 0", "-k"),
    ("conv -F 2 -H 0", "-H"), ("conv -F 2 -y 0", "-y"), ("conv -F 2 -u 0", "-u"),
    ("conv -F 2 -v -1", "-v"), ("conv -F 2 -l 0", "-l"), ("conv -F 2 -p -1", "-p"),
    ("conv -F 2 --pad_w -3", "--pad_w"),
])
def test_sizes_must_be_positive(line, flag):
    assert err(line).flag == flag


@pytest.mark.parametrize("H,Y,u,want", [(56, 3, 1, 1), (57, 3, 2, 1), (57, 7, 2, 3), (7, 1, 1, 0), (10, 5, 3, 2),
                                        (9, 3, 2, 1)])
def test_pad_mode_same(H, Y, u, want):
    # MIOpenDriver: pad = max(fil - (in % s == 0 ? s : in % s), 0) / 2
    p = parse(f"conv -F 2 -H {H} -W {H} -y {Y} -x {Y} -u {u} -v {u} -p 5 -q 5 --pad_mode same").problem
    assert (p.pH, p.pW) == (want, want)


def test_pad_mode_same_sizes_dy_as_miopen_or_is_refused():
    """MIOpen sizes dY ceil(in/stride) in same mode (no dilation) and keeps the rounded-down
    pad on the top/left: where the total pad fil - (in % s or s) is odd that problem pads one
    more row (column) at the bottom (right), which a symmetric-pad problem cannot hold, so
    the line is refused naming -z; every other line gets MIOpen's dY size."""
    for H in range(1, 20):
        for Y in range(1, 8):
            for u in range(1, 5):
                r = H % u or u
                total = max(Y - r, 0)
                line = f"conv -F 2 -H {H} -W 3 -y {Y} -x 1 -u {u} -v 1 -z same"
                if total % 2:
                    e = err(line)
                    assert e.flag == "-z" and f"Ho = ceil(-H {H} / -u {u}) = {-(-H // u)}" in str(e), (line, str(e))
                    assert "symmetric" in e.allowed
                else:
                    p = parse(line).problem
                    assert (p.Ho, p.Wo, p.pH) == (-(-H // u), 3, total // 2), line
    e = err("conv -F 2 -H 9 -W 8 -y 1 -x 2 --pad_mode same")            # the W axis, the long flag
    assert e.flag == "--pad_mode" and "Wo = ceil(-W 8 / -v 1) = 8" in str(e)
    assert parse("conv -F 2 -H 8 -W 8 -y 2 -x 2 -l 2 -j 2 -z same").problem.pH == 0     # dilated: pads as given


def test_pad_mode_valid_zeroes_pads():
    p = parse("conv -F 2 -p 2 -q 1 -z valid").problem
    assert (p.pH, p.pW) == (0, 0)


def test_pad_mode_ignored_for_dilated_filters():
    # only rewritten when all dilations are 1 or the filter is 1x1
    p = parse("conv -F 2 -p 2 -q 2 -l 2 -j 2 -z valid").problem
    assert (p.pH, p.pW) == (2, 2)
    p = parse("conv -F 2 -y 1 -x 1 -p 1 -q 1 -l 2 -j 2 -z valid").problem
    assert (p.pH, p.pW) == (0, 0)


def test_pad_mode_bad_value():
    e = err("conv -F 2 --pad_mode full")
    assert e.flag == "--pad_mode" and "same" in e.allowed


def test_mode_values():
    assert parse("conv -F 2 -m trans").problem.mode == "trans"
    assert err("conv -F 2 -m deconv").flag == "-m"


def test_3d_flags():
    cmd = parse("conv -n 2 -c 2 --in_d 5 -H 4 -W 3 -k 3 --fil_d 5 -y 4 -x 3 --pad_d 0 -p 0 -q 0 "
                "--conv_stride_d 1 -u 1 -v 1 --dilation_d 1 -l 1 -j 1 --spatial_dim 3 -m conv -g 1 -F 2 -t 1")
    p = cmd.problem                      # MIOpen PR #926's line
    assert p.is_3d and (p.Di, p.Z, p.pD, p.sD, p.dD) == (5, 5, 0, 1, 1)
    assert (p.in_layout, p.out_layout, p.fil_layout) == ("NCDHW",) * 3
    assert (p.Do, p.Ho, p.Wo) == (1, 1, 1)
    p = parse("conv -F 2 -_ 3 -! 6 -@ 3 -$ 1 -# 2 -^ 1 -I NDHWC -O NDHWC -f NDHWC").problem
    assert (p.Di, p.Z, p.pD, p.sD, p.dD, p.Do) == (6, 3, 1, 2, 1, 3)


def test_3d_errors():
    assert "spatial_dim 3" in str(err("conv -F 2 -_ 3 -I NHWC"))
    assert err("conv -F 2 -_ 3 --in_d 2 --fil_d 5").flag == "--in_d"
    assert err("conv -F 2 -_ 3 --conv_stride_d 0").flag == "--conv_stride_d"
    assert "spatial_dim 2" in str(err("conv -F 2 -I NCDHW"))


def test_3d_flags_ignored_in_2d():
    # MIOpen perf-model lines carry --conv_stride_d 0 --dilation_d 0 with spatial_dim 2
    p = parse("conv -F 2 --in_d 1 --fil_d 1 --pad_d 0 --conv_stride_d 0 --dilation_d 0").problem
    assert not p.is_3d and (p.Di, p.Z) == (1, 1)


@pytest.mark.parametrize("prefix", ["./bin/MIOpenDriver", "/opt/rocm/bin/MIOpenDriver", "MIOpenDriver",
                                    "MIOpen(HIP): Command [LogCmdConvolution] ./bin/MIOpenDriver"])
def test_leading_program_is_ignored(prefix):
    cmd = parse(f"{prefix} convfp16 -n 2 -F 2")
    assert cmd.base == "convfp16" and cmd.problem.N == 2
    assert cmd.command_line() == "convfp16 -n 2 -F 2"


@pytest.mark.parametrize("line,word", [("tnue convfp16 -n 2 -F 2", "tnue"), ("find conv -F 2", "find"),
                                       ("run convfp16 -F 2", "run"), ("MIOpenDriverX conv -F 2", "MIOpenDriverX"),
                                       ("./bin/MIOpenDriver extra conv -F 2", "./bin/MIOpenDriver")])
def test_words_before_the_base_other_than_the_program_are_refused(line, word):
    """Only the program (a path naming MIOpenDriver, and a log prefix before it) is dropped:
    any other word where the base argument belongs is refused, not skipped (a mistyped
    subcommand would otherwise run the line)."""
    with pytest.raises(MiopenCommandError, match=f"<base> '{re.escape(word)}': unknown base argument"):
        parse(line)


@pytest.mark.parametrize("base,dtype", [("conv", "fp32"), ("convfp32", "fp32"), ("convfp16", "fp16"),
                                        ("convbfp16", "bf16")])
def test_base_arguments(base, dtype):
    assert parse(f"{base} -F 2").problem.dtype == dtype


@pytest.mark.parametrize("base,words", [("convint8", "int8"), ("convfp8", "fp8"), ("convbfp8", "bf8")])
def test_rejected_bases(base, words):
    e = err(f"{base} -F 2")
    assert e.flag == "<base>" and words in str(e)


@pytest.mark.parametrize("line", ["convxx -F 2", "", "-n 2 -F 2"])
def test_unknown_base(line):
    assert err(line).flag == "<base>"


def test_string_and_token_list_agree():
    line = "convbfp16 -n 3 -c 8 -k 16 -H 9 -W 7 -y 3 -x 1 -p 1 -q 0 -F 2 --in_layout NHWC"
    assert parse(line).problem == parse(line.split()).problem


def test_error_attributes_and_message():
    e = err("conv -F 2 -n abc")
    assert (e.flag, e.value, e.allowed) == ("-n", "abc", "an integer")
    assert str(e) == "-n 'abc': allowed: an integer"
    assert isinstance(e, ValueError)


REAL_LINES = [  # research miopen.md §5
    ("./bin/MIOpenDriver conv --batchsize 128 --spatial_dim 2 --pad_h 0 --pad_w 0 --pad_d 0 "
     "--conv_stride_h 2 --conv_stride_w 2 --conv_stride_d 0 --dilation_h 1 --dilation_w 1 "
     "--dilation_d 0 --group_count 1 --mode conv --pad_mode default --trans_output_pad_h 0 "
     "--trans_output_pad_w 0 --trans_output_pad_d 0 --out_layout NCHW --in_d 1 --in_h 14 --in_w 14 "
     "--fil_d 1 --fil_h 1 --fil_w 1 --in_channels 1024 --out_channels 512 --forw 2",
     dict(N=128, C=1024, K=512, Hi=14, Y=1, sH=2, Ho=7, G=1)),
    ("convbfp16 -n 128 -c 384 -H 24 -W 48 -k 384 -y 1 -x 3 -p 0 -q 1 -u 1 -v 1 -l 1 -j 1 -m conv -g 3 "
     "-F 2 -t 1 --iter 100 --in_layout NHWC --out_layout NHWC --fil_layout NHWC",
     dict(N=128, C=384, K=384, Hi=24, Wi=48, X=3, pW=1, G=3, Wo=48, dtype="bf16")),
    ("conv -n 64 -c 512 -H 14 -W 14 -k 512 -y 4 -x 1 -p 0 -q 0 -u 3 -v 1 -l 1 -j 1 -g 1 -F 2 -t 1",
     dict(Y=4, sH=3, Ho=4, Wo=14)),
    ("convbfp16 -n 16 -c 144 -H 24 -W 16 -k 144 -y 5 -x 5 -p 8 -q 8 -u 1 -v 1 -l 4 -j 4 -m conv -g 1 "
     "-F 2 -t 1 --iter 100 --in_layout NHWC --out_layout NHWC --fil_layout NHWC",
     dict(dH=4, pH=8, Ho=24, Wo=16)),
    ("conv -n 32 -c 256 -H 38 -W 38 -k 256 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 -m conv -g 1 -t 1 -F 2 -i 1",
     dict(N=32, C=256, K=256, Ho=38)),
    ("conv -F 2 -n 128 -c 256 -H 17 -W 17 -k 128 -y 1 -x 7 -p 0 -q 3 -u 1 -v 1 -l 1 -j 1 -t 1",
     dict(X=7, pW=3, Wo=17)),
]


@pytest.mark.parametrize("line,expect", REAL_LINES)
def test_real_lines(line, expect):
    p = parse(line).problem
    for k, v in expect.items():
        assert getattr(p, k) == v, k


@pytest.mark.parametrize("problem", [
    ConvProblem(N=2, C=6, Hi=9, Wi=7, K=4, Y=3, X=2, pH=1, pW=0, sH=2, sW=1, dH=1, dW=2, G=2,
                dtype="bf16", in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC"),
    ConvProblem(N=1, C=3, Hi=5, Wi=5, K=3, Y=1, X=1),
])
def test_format_command_round_trips(problem):
    assert parse(format_command(problem)).problem == problem


# ------------------------------------------------------------------ error message shapes
@pytest.mark.parametrize("line", [
    "conv -n 1 -c 4 -F 2 --in_layout 'NHWC",      # unbalanced single quote
    'conv -n 1 -c 4 -F 2 --in_layout "NHWC',      # unbalanced double quote
    "conv -n 1 -c 4 -F 2 -H 8 \\",                 # trailing escape
])
def test_unsplittable_line_is_a_command_error(line):
    with pytest.raises(MiopenCommandError) as e:
        parse(line)
    assert e.value.flag == "<line>" and "cannot split the line" in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("tokens,flag", [
    (["conv", "-F", "2", "--bogus", "3"], "--bogus"),
    (["conv", "-F", "2", "-Q", "3"], "-Q"),
    (["conv", "-F", "2", "5"], "5"),
    (["conv", "-F", "2", "--in_layout=NHWC"], "--in_layout=NHWC"),
])
def test_bad_tokens_are_named_without_a_fake_missing_value(tokens, flag):
    with pytest.raises(MiopenCommandError) as e:
        parse(tokens)
    assert e.value.flag == flag and e.value.value is None
    assert "<missing>" not in str(e.value) and str(e.value).startswith(flag + ":")


@pytest.mark.parametrize("flag", ["-n", "--batchsize", "-I", "-F"])
def test_missing_value_says_missing(flag):
    with pytest.raises(MiopenCommandError) as e:
        parse(["conv", "-F", "2", flag] if flag != "-F" else ["conv", flag])
    assert str(e.value).startswith(f"{flag} <missing>: missing value")


@pytest.mark.parametrize("axis,size,culprit,value", [
    ("Ho", "-H", "-y", "2147483647"), ("Ho", "-H", "-l", "2147483647"), ("Ho", "-H", "-y", "9"),
    ("Wo", "-W", "-x", "2147483647"), ("Wo", "-W", "-j", "2147483647"), ("Wo", "-W", "--fil_w", "20"),
    ("Ho", "-H", "--dilation_h", "5"),
    ("Do", "-!", "-@", "2147483647"), ("Do", "-!", "-^", "2147483647"),
])
def test_a_derived_size_below_one_names_every_flag_that_made_it(axis, size, culprit, value):
    dims = "-_ 3 -! 8 -@ 3" if axis == "Do" else ""
    e = err(f"conv -F 2 -H 8 -W 8 -y 3 -x 3 {dims} {culprit} {value}")
    msg = str(e)
    assert e.flag == size and f"derived {axis}=" in msg
    assert msg.startswith(f"{size} 8 with ") and f"{culprit} {value}" in msg.split(":")[0]
    assert "allowed: " in msg and "'" not in msg.split(":")[0]
    # every flag of the formula, as the user spelled it or by its short form
    flags = {"Ho": ("-y", "-p", "-u", "-l"), "Wo": ("-x", "-q", "-v", "-j"), "Do": ("-@", "-$", "-#", "-^")}[axis]
    for flag in flags:
        assert f"{flag} " in msg or culprit.startswith("--")


@pytest.mark.parametrize("line,pad", [("conv -F 2 -H 2 -W 8 -y 9 -x 3 -u 4 -p 2 --pad_mode valid",
                                       "pad 0 (from --pad_mode valid)")])
def test_a_derived_size_error_says_where_a_pad_mode_pad_came_from(line, pad):
    # (same mode never gets here: its symmetric lines have Ho = ceil(H/u) >= 1, the others are refused first)
    e = err(line)
    assert str(e).startswith(f"-H 2 with -y 9, {pad}, -u 4, -l 1: derived Ho=")


_BASE_LINE = "convfp16 -n 1 -c 8 -H 7 -W 7 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2"
_OWN_RULE = [f for f in FLAGS if f.kind == "int" and (f.values or f.long in ("forw", "spatial_dim", "math_type", "iter"))]


@pytest.mark.parametrize("flag", _OWN_RULE, ids=lambda f: f.long)
@pytest.mark.parametrize("bad", ["abc", "2.0", "3000000000", "-99999999999"])
def test_integer_flags_with_their_own_rule_say_it_for_any_bad_value(flag, bad):
    """A flag that takes only some integers (-V 0 or 1, -F 2, -M, -_ 2 or 3, -i >= 1, ...)
    says what it takes whether the bad value is an integer outside that set, not an integer
    at all, or outside C int range: a fresh-user trial found ``-V abc`` answered "an integer"
    and ``-V 3000000000`` "an integer from -2147483648 to 2147483647" while ``-V 5`` said
    "0 or 1"."""
    with pytest.raises(MiopenCommandError) as own:
        parse(f"{_BASE_LINE} -{flag.short} {0 if flag.long == 'iter' else 123456}".split() if flag.long != "forw" else
              f"{_BASE_LINE.replace('-F 2', '-F 3')}".split())
    with pytest.raises(MiopenCommandError) as e:
        parse(f"{_BASE_LINE.replace('-F 2', '') if flag.long == 'forw' else _BASE_LINE} -{flag.short} {bad}".split())
    assert e.value.flag == f"-{flag.short}" and e.value.allowed == own.value.allowed, (e.value, own.value)
    assert "from -2147483648" not in str(e.value) and "allowed: an integer;" not in str(e.value) + ";"


@pytest.mark.parametrize("flag", [f for f in FLAGS if f.short != "F"], ids=lambda f: f.long)
def test_a_missing_value_says_what_the_flag_takes(flag):
    # "-S <missing>: missing value; allowed: a value" told nothing: every flag names what it takes
    e = err(["conv", "-F", "2", f"-{flag.short}"])
    assert e.flag == f"-{flag.short}" and "missing value" in str(e) and e.allowed not in ("", "a value"), str(e)


def test_format_and_split_refuse_what_they_cannot_take():
    """format_command of no ConvProblem (AttributeError) or of an int8 problem (KeyError) and
    split_command of no string (TypeError) are ValueErrors naming the argument."""
    from miopen_solver.command import format_command, split_command
    from miopen_solver.problem import ConvProblem
    with pytest.raises(ValueError, match=r"^problem None .*: allowed: a ConvProblem$"):
        format_command(None)
    for dtype in ("int8", "fp8", "bf8"):
        with pytest.raises(ValueError, match=rf"^dtype {dtype}: no base argument parses it; allowed: bf16, fp16, fp32$"):
            format_command(ConvProblem(N=1, C=4, Hi=4, Wi=4, K=4, Y=1, X=1, dtype=dtype))
    for bad in (None, 5, b"conv -n 1"):
        with pytest.raises(ValueError, match="^command line .*: allowed: a string$"):
            split_command(bad)


@pytest.mark.parametrize("flag", [f for f in __import__("miopen_solver.command", fromlist=["FLAGS"]).FLAGS
                                  if f.kind == "int"], ids=lambda f: f.short)
def test_a_missing_value_says_what_a_wrong_one_says(flag):
    """`-o` with no value said "an integer" where a wrong value says "0 or 1": for every
    integer flag the missing value names what the flag takes, as a non-integer does."""
    missing = err(["conv", "-F", "2", f"-{flag.short}"])
    wrong = err(["conv", "-F", "2", f"-{flag.short}", "x"])
    assert missing.detail == "missing value" and missing.allowed == wrong.allowed, (missing, wrong)
