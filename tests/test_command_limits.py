"""Parser limits: integers are C ints (refused by length before any conversion), shell
splitting is linear and equals shlex, a whole line may be one argument, and the flags this
solver cannot honour are refused by one check."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import count_calls
from miopen_solver.command import FLAGS, INT_MAX, INT_MIN, check_supported, parse, split_command
from miopen_solver.errors import MiopenCommandError

INT_FLAGS = [f for f in FLAGS if f.kind == "int"]
LINE = ("convfp16 -n 2 -c 8 -H 9 -W 7 -k 8 -y 3 -x 3 -p 1 -q 1 -u 2 -v 1 -F 2 "
        "--in_layout NHWC --out_layout NHWC --fil_layout NHWC")


def parse_err(tokens) -> MiopenCommandError:
    with pytest.raises(MiopenCommandError) as info:
        parse(tokens, allow_any_direction=True)
    return info.value


# ------------------------------------------------------------------ integers are C ints
OUT_OF_RANGE = [str(INT_MAX + 1), str(INT_MIN - 1), "9" * 11, "9" * 4301, "9" * 100_000,
                "-" + "9" * 5000, "+" + "1" + "0" * 4300, "1" + "0" * 2_000_000]


@pytest.mark.parametrize("flag", INT_FLAGS, ids=lambda f: f.long)
@pytest.mark.parametrize("form", ["short", "long"])
def test_every_int_flag_refuses_values_past_a_c_int(flag, form):
    text = f"-{flag.short}" if form == "short" else f"--{flag.long}"
    for value in OUT_OF_RANGE:
        (e,), calls = count_calls(lambda: [parse_err(["conv", "-F", "2", text, value])])
        assert e.flag == text and "out of range" in str(e)
        if flag.values or flag.long in ("forw", "spatial_dim", "math_type", "iter"):
            assert f"from {INT_MIN}" not in e.allowed   # the flag's own rule (-V: 0 or 1), test_command.py
        else:
            assert f"from {INT_MIN} to {INT_MAX}" in str(e) and "32-bit int" in str(e)
        assert len(str(e)) < 300                      # the value is cut, not echoed whole
        assert calls < 200                            # refused by length, never converted


@pytest.mark.parametrize("flag", INT_FLAGS, ids=lambda f: f.long)
def test_every_int_flag_reads_the_whole_int_range(flag):
    # INT_MIN and INT_MAX parse as integers; a later rule may still refuse the value for
    # this flag (-F must be 2, sizes >= 1 ...), but never as out of range.
    for value in (INT_MIN, INT_MAX, 0, -0, 1):
        try:
            cmd = parse(["conv", "-F", "2", f"-{flag.short}", str(value)], allow_any_direction=True)
        except MiopenCommandError as e:
            assert "out of range" not in str(e) and e.allowed != "an integer"
        else:
            assert cmd.flags[flag.long] == value


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["", "+", "-"]), st.integers(0, 12), st.integers(0, 10**15))
def test_integer_values_property(sign, zeros, magnitude):
    text = sign + "0" * zeros + str(magnitude)
    want = -magnitude if sign == "-" else magnitude
    tokens = ["conv", "-F", "2", "-Y", text]          # trans_output_pad_h: any int is valid
    if INT_MIN <= want <= INT_MAX:
        assert parse(tokens).flags["trans_output_pad_h"] == want
    else:
        assert "out of range" in str(parse_err(tokens))


def test_a_huge_value_no_longer_crashes_any_caller():
    # Python's int() refuses more than 4300 digits with a bare ValueError (a traceback in
    # applicable/config and a lost batch before); now it is a MiopenCommandError.
    for flag in ("-n", "-u", "--pad_h", "-i"):
        e = parse_err(LINE.split() + [flag, "7" * 5000])
        assert type(e) is MiopenCommandError and "(5000 characters)" in str(e)


# ------------------------------------------------------------------ shell splitting
SHELL_ALPHABET = st.sampled_from(list("ab -\t\n\r\"'\\#$é") + ["\x0c", "\x0b", "\u2028", "\u0085"])


@settings(max_examples=2000, deadline=None)
@given(st.lists(SHELL_ALPHABET, max_size=24).map("".join))
def test_split_command_equals_shlex(text):
    try:
        want = shlex.split(text)
    except ValueError as e:
        with pytest.raises(MiopenCommandError, match=f"cannot split the line: {e}"):
            split_command(text)
    else:
        assert split_command(text) == want


@pytest.mark.parametrize("token", ["a" * 2_000_000, '"' + "a" * 2_000_000 + '"', "'" + "a" * 2_000_000 + "'",
                                   '"' + "a" * 2_000_000, "1" * 2_000_000])
def test_a_megabyte_token_costs_what_a_short_one_costs(token):
    """shlex grew a token one character at a time (quadratic: 35 s for 2 MB); the splitter
    and parser take a long token in a constant number of calls."""
    def work(tok):
        try:
            parse("conv -F 2 -n " + tok)
        except MiopenCommandError as e:
            return len(str(e))
    short = token[:10] + token[-1]
    (n_long, calls_long), (_, calls_short) = count_calls(lambda: work(token)), count_calls(lambda: work(short))
    assert n_long < 300 and calls_long <= calls_short + 20


# ------------------------------------------------------------------ a whole line as one argument
@pytest.mark.parametrize("line", [LINE, "./bin/MIOpenDriver " + LINE, "  " + LINE.replace(" ", "\t") + "\n"])
def test_a_whole_line_given_as_one_argument(line):
    assert parse([line]).problem == parse(LINE.split()).problem
    assert parse([line]).argv == tuple(LINE.split())
    one = parse(["conv"], allow_any_direction=True)               # one token without spaces: as is
    assert one.problem == parse("conv", allow_any_direction=True).problem and one.argv == ("conv",)


def test_one_argument_with_an_unbalanced_quote_is_one_error():
    e = parse_err([LINE + ' -n "2'])
    assert e.flag == "<line>" and "No closing quotation" in str(e)


# ------------------------------------------------------------------ flags a run refuses
REFUSED = [
    (["-Z", "1"], "-Z '1': vectorized tensors are not supported by this solver; allowed: 0"),
    (["--tensor_vect", "2"], "--tensor_vect '2': vectorized tensors are not supported"),
    (["-L", "4"], "-L '4': a vector length needs vectorized tensors (-Z 1)"),
    (["--vector_length", "8"], "--vector_length '8': a vector length needs vectorized tensors"),
    (["-G", "1"], "-G '1': '--gpualloc 1' should not be used with enabled verification"),
    (["-U", "fp16"], "-U 'fp16': cast types are not supported; allowed: -1"),
    (["--out_cast_type", "bf16"], "--out_cast_type 'bf16': cast types are not supported"),
    (["-R", "fp8"], "-R 'fp8': cast types are not supported"),
]


@pytest.mark.parametrize("extra,needle", REFUSED)
def test_check_supported_refuses_what_parses(extra, needle):
    cmd = parse(LINE.split() + extra)                      # MIOpenDriver takes the line ...
    with pytest.raises(MiopenCommandError) as info:
        check_supported(cmd)                               # ... this solver cannot honour it
    assert needle in str(info.value)


@pytest.mark.parametrize("extra", [[], ["-Z", "0", "-L", "1"], ["-G", "1", "-V", "0"], ["-U", "-1"], ["-G", "0"]])
def test_check_supported_accepts_the_defaults(extra):
    check_supported(parse(LINE.split() + extra))


@pytest.mark.parametrize("token", ["-\x1b[31mX", "--in_\x1blayout", "\x07", "\x00", "-n\u2028", "stray\x7f",
                                   "-\x9b2J", "--x" + "\x00" * 500])
def test_a_flag_token_with_control_characters_is_shown_escaped(token):
    """An unknown flag or stray token was echoed as written: a NUL, BEL or ESC sequence in a
    line (a binary batch file, a pasted terminal capture) went raw into the error line and
    the batch row (an escape sequence acted on the terminal). Such a token is shown as its
    ``repr``, as values and paths are; printable ones stay as written."""
    e = parse_err(["conv", "-F", "2", "-n", "1", token, "1"])
    shown = str(e).split(": ")[0]
    assert shown.isprintable() and shown.startswith("'") and len(shown) < 300, shown
    assert e.flag == token
    assert str(parse_err(["conv", "-F", "2", "--nope", "1"])).startswith("--nope: unknown flag")
