"""MIOpenDriver ``conv*`` command lines -> :class:`ConvProblem`.

Semantics follow MIOpenDriver (driver/InputFlags.cpp, driver/conv_driver.hpp):

* ``argv[0]`` (after any leading program path such as ``./bin/MIOpenDriver``) is the base
  argument: ``conv``/``convfp32`` (fp32), ``convfp16``, ``convbfp16``; ``convint8``,
  ``convfp8`` and ``convbfp8`` are recognised and rejected.
* a flag's value is always the next token; the last repeat wins;
* defaults are MIOpen's (table in :data:`FLAGS`).

Where MIOpen is lax we are strict, and say so in one :class:`MiopenCommandError` naming
the flag, the value and what is allowed: unknown flags, missing values, non-integers,
integers outside C ``int`` (MIOpenDriver reads every integer flag into a 32-bit ``int``;
longer digit strings are refused before any conversion), ``-i 0``, a group count that does
not divide C and K, and a dilated filter larger than the padded input (derived Ho/Wo below
1 by floor division) are errors (MIOpen exits 0, or runs Ho/Wo = 1 with a window past the
input's edge).
Layout values are accepted in any case (MIOpen rejects lowercase short forms, issues
#1235/#1311). ``-F`` is a direction bitmask and only exactly ``2`` (backward data) is
accepted. :func:`check_supported` refuses what parses but this solver cannot honour
(vectorized tensors, cast types, ``-G 1`` with ``-V 1``); every subcommand applies it.

``-M``/``--math_type`` is MIOpen's math type (``driver/conv_driver.hpp``, 07647551): 1
(``miopenMathPedantic``, IEEE fp32) by default, 0 (``miopenMathDefault``) computes fp32 lines
with TF32 math (``ConvProblem.tf32``; :mod:`miopen_solver.tf32`); any other value is an error
naming the flag (MIOpen prints "Invalid math_type value" and exits 0). TF32 applies to fp32
only, as in MIOpen: ``convfp16``/``convbfp16`` lines with ``-M 0`` compute as without it.

Cost: parsing is linear in the line's length (the shell-style splitter included), so a
megabyte token is refused in milliseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import MiopenCommandError, shown_value
from .problem import INT_MAX, INT_MIN, LAYOUTS_2D, LAYOUTS_3D, ConvProblem, output_size
from .tf32 import MATH_DEFAULT, MATH_PEDANTIC, MATH_TYPE_ALLOWED

BASE_DTYPES = {"conv": "fp32", "convfp32": "fp32", "convfp16": "fp16", "convbfp16": "bf16"}
"""Accepted base arguments and their storage type."""

REJECTED_BASES = {
    "convint8": "int8 has no backward-data pass in MIOpen (RunBackwardGPU prints 'Int8 Backward Convolution is not supported')",
    "convfp8": "fp8 backward data is not supported by this solver",
    "convbfp8": "bf8 backward data is not supported by this solver",
}


@dataclass(frozen=True)
class Flag:
    short: str
    long: str
    default: object
    kind: str  # "int" | "str" | "layout" | "choice"
    help: str
    choices: tuple = ()
    values: tuple = ()
    """The integers a flag takes (empty: any 32-bit int, or its own rule in :func:`parse`);
    ``(0, 1)`` is a switch."""


# MIOpen's conv driver flags (ConvDriver::AddCmdLineArgs), short letter, long name, default.
# MIOpenDriver reads every int flag with GetValueInt; the switches are on as ``!= 0`` (-t, -o,
# -b, -J) or ``== 1`` (-V, -s, -G, -N), -w 1/2 as ``>= 1``/``>= 2``, and -~ takes 0, 1 or 2
# (rocm-libraries projects/miopen/driver: conv_driver.hpp 07647551, main.cpp for -V, the
# Driver base class for -J and -~, which refuses other -~ values itself). Here a switch
# takes 0 or 1 and -w, -~ their codes (``values``); anything else is refused, never read as on
# or off. Flags whose every value MIOpen takes and that change nothing here are any 32-bit
# int: -P (MIOpen's conv driver never reads it), -r (cache names only), -& (passed to
# miopenSetTuningPolicy), -% -Y -X (read only with -m trans, which is refused).
FLAGS = (
    Flag("I", "in_layout", "", "layout", "dX layout (NCHW, NHWC, CHWN, NCDHW, NDHWC)"),
    Flag("O", "out_layout", "", "layout", "dY layout"),
    Flag("f", "fil_layout", "", "layout", "W layout"),
    Flag("_", "spatial_dim", 2, "int", "2 or 3"),
    Flag("F", "forw", 0, "int", "direction bitmask: 1 fwd, 2 bwd data, 4 bwd weights"),
    Flag("n", "batchsize", 100, "int", "N"),
    Flag("c", "in_channels", 3, "int", "C"),
    Flag("!", "in_d", 32, "int", "input depth (3-D)"),
    Flag("H", "in_h", 32, "int", "dX height"),
    Flag("W", "in_w", 32, "int", "dX width"),
    Flag("k", "out_channels", 32, "int", "K"),
    Flag("@", "fil_d", 3, "int", "filter depth (3-D)"),
    Flag("y", "fil_h", 3, "int", "filter height"),
    Flag("x", "fil_w", 3, "int", "filter width"),
    Flag("#", "conv_stride_d", 1, "int", "stride depth"),
    Flag("u", "conv_stride_h", 1, "int", "stride height"),
    Flag("v", "conv_stride_w", 1, "int", "stride width"),
    Flag("$", "pad_d", 0, "int", "pad depth"),
    Flag("p", "pad_h", 0, "int", "pad height"),
    Flag("q", "pad_w", 0, "int", "pad width"),
    Flag("r", "pad_val", 0, "int", "pad value (any int; MIOpen uses it only in cache names)"),
    Flag("%", "trans_output_pad_d", 0, "int", "transposed-mode output pad depth (any int; -m trans only)"),
    Flag("Y", "trans_output_pad_h", 0, "int", "transposed-mode output pad height (any int; -m trans only)"),
    Flag("X", "trans_output_pad_w", 0, "int", "transposed-mode output pad width (any int; -m trans only)"),
    Flag("i", "iter", 10, "int", "timed iterations (> 0)"),
    Flag("V", "verify", 1, "int", "verify (0/1)", values=(0, 1)),
    Flag("C", "verification_cache", "", "str", "reference cache directory"),
    Flag("t", "time", 0, "int", "print kernel time (0/1)", values=(0, 1)),
    Flag("w", "wall", 0, "int", "wall-clock timing (0/1/2), needs -t 1", values=(0, 1, 2)),
    Flag("s", "search", 0, "int", "exhaustive search (0/1)", values=(0, 1)),
    Flag("P", "printconv", 1, "int", "unused by MIOpen's conv driver (any int)"),
    Flag("o", "dump_output", 0, "int", "dump buffers to dump_*.bin (0/1)", values=(0, 1)),
    Flag("d", "in_data", "", "str", "x file (unused for backward data)"),
    Flag("e", "weights", "", "str", "W binary input file"),
    Flag("b", "bias", "", "str", "bias (0/1; empty is 0)", values=(0, 1)),
    Flag("m", "mode", "conv", "choice", "conv or trans", ("conv", "trans")),
    Flag("z", "pad_mode", "default", "choice", "default, same or valid", ("default", "same", "valid")),
    Flag("Z", "tensor_vect", 0, "int", "vectorised tensor (0/1)"),
    Flag("L", "vector_length", 1, "int", "vector length"),
    Flag("^", "dilation_d", 1, "int", "dilation depth"),
    Flag("l", "dilation_h", 1, "int", "dilation height"),
    Flag("j", "dilation_w", 1, "int", "dilation width"),
    Flag("a", "in_bias", "", "str", "bias file"),
    Flag("g", "group_count", 1, "int", "G, divides C and K"),
    Flag("D", "dout_data", "", "str", "dY binary input file"),
    Flag("S", "solution", "-1", "str", "solution id or solver name (immediate mode)"),
    Flag("G", "gpualloc", 0, "int", "allocate on GPU (0/1)", values=(0, 1)),
    Flag("U", "in_cast_type", "-1", "str", "cast type"),
    Flag("T", "out_cast_type", "-1", "str", "cast type"),
    Flag("R", "wei_cast_type", "-1", "str", "cast type"),
    Flag("N", "init_output_nan", 0, "int", "initialise output with NaN (0/1; newer MIOpen)", values=(0, 1)),
    Flag("&", "tuning_policy", 0, "int", "tuning policy (any int; newer MIOpen)"),
    Flag("M", "math_type", 1, "int", "math type: 0 miopenMathDefault (TF32 math for fp32), "
                                     "1 miopenMathPedantic (IEEE fp32)"),
    Flag("~", "gpubuffer_check", 0, "int", "GPU buffer check (0 none, 1 front, 2 back; newer MIOpen)",
         values=(0, 1, 2)),
    Flag("J", "use_hip_graph", 0, "int", "time through a graph (0/1; newer MIOpen)", values=(0, 1)),
)

_BY_SHORT = {f.short: f for f in FLAGS}
_BY_LONG = {f.long: f for f in FLAGS}


def is_conv_flag(token: str) -> bool:
    """``token`` names a MIOpenDriver conv flag (``-n`` or ``--batchsize``)."""
    if token.startswith("--"):
        return token[2:] in _BY_LONG
    return len(token) == 2 and token[0] == "-" and token[1] in _BY_SHORT


def is_driver_program(token: str) -> bool:
    """``token`` is the MIOpenDriver program (``MIOpenDriver``, ``./bin/MIOpenDriver``)."""
    return token == "MIOpenDriver" or token.endswith("/MIOpenDriver")


DIRECTION_BITS = ((1, "forward"), (2, "backward data"), (4, "backward weights"))


def describe_directions(forw: int) -> str:
    """Plain words for what a ``-F`` bitmask asks MIOpenDriver to run.

    MIOpen (``ParseCmdLineArgs``): ``is_fwd = F == 0 || F & 1``, ``is_bwd = F == 0 || F & 2``,
    ``is_wrw = F == 0 || F & 4``; bits 8 and up select nothing."""
    if forw == 0:
        return "forward, backward data and backward weights (-F 0 runs all three)"
    if forw < 0:
        return "a negative value, which is not a direction bitmask"
    names = [n for bit, n in DIRECTION_BITS if forw & bit]
    extra = " (bits 8 and up select nothing)" if forw >= 8 else ""
    if not names:
        return "no direction at all (only bits 1, 2 and 4 select directions)"
    words = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return words + extra


@dataclass(frozen=True)
class DriverCommand:
    """A parsed MIOpenDriver line: the problem plus the driver's run options."""

    base: str
    problem: ConvProblem
    flags: dict = field(compare=False)
    """Every flag's final value, keyed by long name (defaults filled in)."""
    argv: tuple = ()
    written: dict = field(default_factory=dict, compare=False)
    """How each flag given on the line was written (``-n`` or ``--batchsize``), by long name."""
    typed: dict = field(default_factory=dict, compare=False)
    """Each given flag's value as the line typed it (``-0``, ``007``), by long name."""

    def flag_text(self, name: str) -> str:
        """The flag ``name`` (long name) as the line wrote it, else its short form."""
        return self.written.get(name, "-" + _BY_LONG[name].short)

    def value_text(self, name: str) -> str:
        """The value of flag ``name`` as the line typed it, else its default's text: what a
        message echoes (``-n -0``, not the ``0`` it parsed to)."""
        return self.typed.get(name, str(self.flags[name]))

    def given(self, name: str) -> str:
        """Flag ``name`` and its value as the line wrote them (``-s 1``, ``--search 1``): what
        a note that a flag is ignored or not honoured quotes."""
        return f"{self.flag_text(name)} {self.value_text(name)}"

    @property
    def iters(self) -> int:
        return int(self.flags["iter"])

    @property
    def verify(self) -> int:
        return int(self.flags["verify"])

    @property
    def time(self) -> int:
        return int(self.flags["time"])

    @property
    def wall(self) -> int:
        return int(self.flags["wall"])

    @property
    def bias(self) -> bool:
        """``-b``: MIOpenDriver's ``GetValueInt("bias") != 0`` (its default is the empty
        string, which reads as 0); :func:`parse` has checked any other value is 0 or 1."""
        text = str(self.flags["bias"]).strip()
        return text != "" and int(text) != 0

    @property
    def solution(self) -> str:
        return str(self.flags["solution"])

    def command_line(self) -> str:
        """The line as MIOpenDriver echoes it (base argument and flags)."""
        return " ".join(self.argv)


def _strip_prefix(tokens: list) -> list:
    """Drop the program and what precedes it (``./bin/MIOpenDriver``, a log line's
    ``MIOpen(HIP): Command [LogCmdConvolution] ./bin/MIOpenDriver``): everything up to a
    token that names ``MIOpenDriver`` when the base argument follows it. Other words before
    the base are not dropped, so a mistyped subcommand (``dgrad-driver tnue convfp16 ...``) is
    an unknown base argument, not a silent run."""
    for i, t in enumerate(tokens[:-1]):
        if is_driver_program(t) and (
                tokens[i + 1] in BASE_DTYPES or tokens[i + 1] in REJECTED_BASES):
            return tokens[i + 1:]
    return tokens


_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT_ALLOWED = f"an integer from {INT_MIN} to {INT_MAX} (MIOpenDriver reads integer flags as 32-bit int)"


def parse_int(flag_text: str, value: str) -> int:
    """A plain decimal integer (ASCII digits, optional sign) that fits a C ``int``. Python's
    ``int`` alone would also take ``1_000``, surrounding spaces and non-ASCII digits; MIOpen's
    ``atoi`` would take ``12abc`` as 12 and ``abc`` as 0. All of those are errors here, and
    so is a digit string longer than an ``int`` can be: it is refused by its length, before
    any conversion (Python refuses to convert more than 4300 digits, and a value that
    large could never reach MIOpen's 32-bit flags anyway)."""
    if not isinstance(value, str) or not _INT_RE.fullmatch(value):
        raise MiopenCommandError(flag_text, value, "an integer")
    digits = value.lstrip("+-").lstrip("0") or "0"          # leading zeros are harmless
    if len(digits) > len(str(INT_MAX)):
        raise MiopenCommandError(flag_text, value, _INT_ALLOWED, "out of range")
    n = -int(digits) if value.startswith("-") else int(digits)
    if not INT_MIN <= n <= INT_MAX:
        raise MiopenCommandError(flag_text, value, _INT_ALLOWED, "out of range")
    return n


_SHELL_SPACE = " \t\r\n"
_SHELL_PIECE = re.compile(r"""
      (?P<plain>[^ \t\r\n'"\\]+)               # unquoted characters
    | \\(?P<escaped>.)                           # backslash: the next character as is
    | '(?P<single>[^']*)'                       # single quotes: everything literal
    | "(?P<double>[^"\\]*(?:\\.[^"\\]*)*)"         # double quotes: \" and \\ are escapes
    | (?P<space>[ \t\r\n]+)
""", re.S | re.X)
_DOUBLE_QUOTED = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.S)
_DOUBLE_QUOTED_ESCAPE = re.compile(r'\\(["\\])')


def split_command(line: str) -> list:
    """Shell-split one command line exactly as :func:`shlex.split` does (POSIX rules,
    no comments), in time linear in the line's length (``shlex`` grows a token one
    character at a time and takes quadratic time on a long one: 35 s for 2 MB).

    Raises:
        MiopenCommandError: the line cannot be split (an unbalanced quote, a trailing
            backslash).
        ValueError: ``line`` is not a string.
    """
    if not isinstance(line, str):
        raise ValueError(f"command line {shown_value(line)}: allowed: a string")
    tokens, current, started, pos = [], [], False, 0
    while pos < len(line):
        m = _SHELL_PIECE.match(line, pos)
        if m is None:  # an unclosed quote, or a backslash at the end (also inside "...)
            rest = _DOUBLE_QUOTED.match(line, pos + 1).end() if line[pos] == '"' else pos
            why = "No escaped character" if line[rest:] == "\\" else "No closing quotation"
            raise MiopenCommandError("<line>", line, "a shell-quoted MIOpenDriver command line",
                                     f"cannot split the line: {why}")
        kind, text = m.lastgroup, m.group(m.lastgroup)
        if kind == "space":
            if started:
                tokens.append("".join(current))
            current, started = [], False
        else:
            current.append(_DOUBLE_QUOTED_ESCAPE.sub(r"\1", text) if kind == "double" else text)
            started = True
        pos = m.end()
    if started:
        tokens.append("".join(current))
    return tokens


_ARGV_ALLOWED = "a command line (str) or its tokens (a list or tuple of str)"


def _tokens(argv) -> list:
    """``argv``'s tokens when it is a list or tuple of strings.

    Raises:
        MiopenCommandError: ``argv`` or one of its tokens is of another type.
    """
    if not isinstance(argv, (list, tuple)):
        raise MiopenCommandError("argv", None, _ARGV_ALLOWED, f"got {shown_value(argv)}")
    for i, t in enumerate(argv):
        if not isinstance(t, str):
            raise MiopenCommandError(f"argv[{i}]", None, _ARGV_ALLOWED, f"got {shown_value(t)}")
    return list(argv)


def parse(argv, *, allow_any_direction: bool = False) -> DriverCommand:
    """Parse a MIOpenDriver conv command.

    Args:
        argv: a string (shell-split, :func:`split_command`) or a token list, starting with
            the base argument (anything before it, e.g. ``./bin/MIOpenDriver``, is
            ignored); a list of one token holding whitespace is a whole line given as one
            argument, and is split the same way.
        allow_any_direction: accept any ``-F`` value (for tools that list lines and skip
            non-backward ones with a note). The solver itself always requires ``-F 2``.

    Returns:
        A :class:`DriverCommand` whose ``problem`` is validated.

    Raises:
        MiopenCommandError: for every user mistake, naming the flag, the value and what
            is allowed; also ``argv`` that is neither a string nor a list or tuple of
            strings (``None``, bytes: decode them first), naming it.
    """
    tokens = split_command(argv) if isinstance(argv, str) else _tokens(argv)
    if len(tokens) == 1 and any(ch in _SHELL_SPACE for ch in tokens[0]):
        tokens = split_command(tokens[0])
    tokens = _strip_prefix(tokens)
    if not tokens:
        raise MiopenCommandError("<base>", None, ", ".join(BASE_DTYPES), "empty command")
    base = tokens[0]
    if base in REJECTED_BASES:
        raise MiopenCommandError("<base>", base, ", ".join(BASE_DTYPES), REJECTED_BASES[base])
    if base not in BASE_DTYPES:
        raise MiopenCommandError("<base>", base, ", ".join(BASE_DTYPES), "unknown base argument")

    values = {f.long: f.default for f in FLAGS}
    given = {}  # long name -> flag text as written (for messages)
    typed = {}  # long name -> its value as written (for messages)
    i = 1
    while i < len(tokens):
        tok = tokens[i]
        if tok in ("-h", "--help", "-?"):
            raise MiopenCommandError(tok, None, "a conv flag", "help is not a command")
        if tok.startswith("--") and len(tok) > 2:
            name = tok[2:]
            if "=" in name:
                raise MiopenCommandError(tok, None, f"--{name.split('=')[0]} VALUE (space-separated)",
                                         "MIOpenDriver takes the value as the next token")
            flag = _BY_LONG.get(name)
            if flag is None:
                raise MiopenCommandError(tok, None, "a MIOpenDriver conv flag (see --help)", "unknown flag")
        elif tok.startswith("-") and len(tok) == 2:
            flag = _BY_SHORT.get(tok[1])
            if flag is None:
                raise MiopenCommandError(tok, None, "a MIOpenDriver conv flag (see --help)", "unknown flag")
        else:
            raise MiopenCommandError(tok, None, "-<letter> VALUE or --<long_name> VALUE pairs",
                                     "not a flag (values follow their flag)")
        if i + 1 >= len(tokens) or _FLAG_TOKEN.fullmatch(tokens[i + 1]):    # "-n -c 16": -n has no value
            raise MiopenCommandError(tok, MiopenCommandError.MISSING, _own_allowed(flag) or _allowed(flag),
                                     "missing value")
        raw = tokens[i + 1]
        values[flag.long] = _convert(tok, flag, raw)
        given[flag.long] = tok
        typed[flag.long] = raw
        i += 2

    flag_text = {f.long: given.get(f.long, "-" + f.short) for f in FLAGS}
    shown = {f.long: typed.get(f.long, str(values[f.long])) for f in FLAGS}     # values as typed, for messages
    forw = values["forw"]
    if forw != 2 and not allow_any_direction:
        if "forw" not in given:
            raise MiopenCommandError("-F", None, "-F 2 (backward data)", f"not given: MIOpenDriver's default 0 "
                                     f"asks for {describe_directions(forw)}")
        raise MiopenCommandError(flag_text["forw"], shown["forw"], _OWN_RULES["forw"],
                                 f"the line asks for {describe_directions(forw)}")
    if not 1 <= values["iter"] <= MAX_LAUNCHES:
        raise MiopenCommandError(flag_text["iter"], shown["iter"], _OWN_RULES["iter"])
    for f in FLAGS:                     # switches and coded flags: their values only
        v = values[f.long]
        if f.values and f.kind == "str":    # -b: an int flag in MIOpen whose default is "" (0)
            v = parse_int(flag_text[f.long], str(v).strip()) if str(v).strip() else 0
        if f.values and v not in f.values:
            raise MiopenCommandError(flag_text[f.long], shown[f.long], _own_allowed(f))
    sdim = values["spatial_dim"]
    if sdim not in (2, 3):
        raise MiopenCommandError(flag_text["spatial_dim"], shown["spatial_dim"], _OWN_RULES["spatial_dim"])
    if values["math_type"] not in (MATH_DEFAULT, MATH_PEDANTIC):
        raise MiopenCommandError(flag_text["math_type"], shown["math_type"], _OWN_RULES["math_type"])

    problem = _build_problem(base, values, flag_text, shown)
    return DriverCommand(base=base, problem=problem, flags=values, argv=tuple(tokens), written=given, typed=typed)


def check_supported(cmd: DriverCommand) -> None:
    """Refuse what parses (MIOpenDriver takes it) but this solver cannot honour: vectorized
    tensors (``-Z`` other than 0, ``-L`` other than 1), cast types (``-U/-T/-R`` other than
    -1) and ``-G 1`` with ``-V 1`` (MIOpenDriver refuses that pair too). ``run``, ``tune``,
    ``batch``, ``applicable`` and ``config`` all apply it, so a line one of them refuses
    is refused by all.

    Raises:
        MiopenCommandError: the first such flag, with its value and what is allowed.
    """
    f = cmd.flags
    if f["tensor_vect"] != 0:
        raise MiopenCommandError(cmd.flag_text("tensor_vect"), cmd.value_text("tensor_vect"), "0",
                                 "vectorized tensors are not supported by this solver")
    if f["vector_length"] != 1:
        raise MiopenCommandError(cmd.flag_text("vector_length"), cmd.value_text("vector_length"), "1",
                                 "a vector length needs vectorized tensors (-Z 1), which this solver "
                                 "does not support")
    if f["gpualloc"] == 1 and f["verify"] == 1:
        raise MiopenCommandError(cmd.flag_text("gpualloc"), cmd.value_text("gpualloc"), "-G 0, or -G 1 with -V 0",
                                 "'--gpualloc 1' should not be used with enabled verification (as in MIOpenDriver)")
    for name in ("in_cast_type", "out_cast_type", "wei_cast_type"):
        if str(f[name]) != "-1":
            raise MiopenCommandError(cmd.flag_text(name), cmd.value_text(name), "-1", "cast types are not supported")


MAX_LAUNCHES = 100_000
"""Most launches one run times or warms up (``-i``, ``--warmup``, ``batch --iters``): a run's
work is bounded by its problem's size, not by a count's magnitude (MIOpenDriver takes any
``int``; at 2^31 launches even a 10 us kernel would run for six hours)."""


_FLAG_TOKEN = re.compile(r"-[A-Za-z$%]|--[a-z_]+")
"""A token that is a flag of the line (``-c``, ``--in_layout``), never a value: where a
value is due, it means the value is missing. Negative numbers (``-1``) are values."""


def _allowed(flag: Flag) -> str:
    if flag.kind == "int":
        return "an integer"
    if flag.kind == "layout":
        return ", ".join(LAYOUTS_2D + LAYOUTS_3D)
    if flag.kind == "choice":
        return ", ".join(flag.choices)
    return flag.help       # what the string flag names, e.g. "dY binary input file"


_OWN_RULES = {"forw": "exactly 2 (backward data)", "spatial_dim": "2 or 3", "math_type": MATH_TYPE_ALLOWED,
              "iter": f"an integer from 1 to {MAX_LAUNCHES} (timed launches)"}
"""What the integer flags checked by :func:`parse` after conversion take (its messages)."""


def _own_allowed(flag: Flag) -> str | None:
    """What an integer flag with its own rule takes (:data:`_OWN_RULES`, or its value set),
    also for a value that is not an integer or is out of ``int`` range; None for a plain
    integer flag."""
    if flag.long in _OWN_RULES:
        return _OWN_RULES[flag.long]
    if flag.values:
        *most, last = map(str, flag.values)
        return f"{', '.join(most)} or {last}"
    return None


def _convert(tok: str, flag: Flag, raw: str):
    if flag.kind == "int":
        try:
            return parse_int(tok, raw)
        except MiopenCommandError as e:
            own = _own_allowed(flag)
            if own is None:
                raise
            raise MiopenCommandError(tok, raw, own, e.detail) from None
    if flag.kind == "layout":
        if raw == "":           # MIOpenDriver's default value: NCHW (NCDHW in 3-D), set by parse
            return ""
        up = raw.upper()
        if up not in LAYOUTS_2D + LAYOUTS_3D:
            raise MiopenCommandError(tok, raw, _allowed(flag), "unknown layout")
        return up
    if flag.kind == "choice":
        if raw not in flag.choices:
            raise MiopenCommandError(tok, raw, _allowed(flag))
        return raw
    return raw


_POSITIVE = (("batchsize", "N"), ("in_channels", "C"), ("out_channels", "K"), ("in_h", "Hi"),
             ("in_w", "Wi"), ("fil_h", "Y"), ("fil_w", "X"), ("conv_stride_h", "sH"),
             ("conv_stride_w", "sW"), ("dilation_h", "dH"), ("dilation_w", "dW"))


def _same_pad(size: int, filt: int, stride: int) -> int:
    """MIOpenDriver's ``--pad_mode same`` pad: ``max(fil - (in % s == 0 ? s : in % s), 0) / 2``."""
    r = stride if size % stride == 0 else size % stride
    return max(filt - r, 0) // 2


def _check_same_symmetric(v: dict, ft: dict, shown: dict, pads: tuple) -> None:
    """Refuse a ``--pad_mode same`` line whose MIOpen problem pads one side more than the
    other: without dilation MIOpen sizes dY ``ceil(in/stride)`` in that mode
    (``ConvolutionDescriptor::GetForwardOutputTensorWithLayout``, src/convolution.cpp) but
    keeps the rounded-down pad of :func:`_same_pad` at the top and left, so where the total
    pad ``filter - (in % stride or stride)`` is odd, dY has one more row (column) than the
    symmetric pad gives and its window reaches one element past the bottom (right) edge.
    ``pads``: the :func:`_same_pad` pads along H, W (and D)."""
    axes = (("Ho", "in_h", "fil_h", "conv_stride_h", "row at the bottom"),
            ("Wo", "in_w", "fil_w", "conv_stride_w", "column at the right"),
            ("Do", "in_d", "fil_d", "conv_stride_d", "plane at the back"))
    for (axis, size, filt, stride, side), pad in zip(axes, pads):
        n, f, s = v[size], v[filt], v[stride]
        want, got = -(-n // s), output_size(n, f, pad, s, 1)
        if got != want:
            raise MiopenCommandError(
                ft["pad_mode"], shown["pad_mode"],
                "symmetric padding: -z default with explicit pads, or -z same where filter - (in % stride, "
                "or stride) is even or below 1",
                f"in same mode MIOpen sizes dY {axis} = ceil({ft[size]} {n} / {ft[stride]} {s}) = {want}, but pads "
                f"{pad} on both sides give {got} (MIOpen pads one extra {side}); this solver takes symmetric pads")


def _build_problem(base: str, v: dict, ft: dict, shown: dict) -> ConvProblem:
    """The problem of parsed values ``v``; ``ft`` and ``shown`` are each flag and its value
    as the line wrote them, for messages."""
    sdim = v["spatial_dim"]
    is3 = sdim == 3
    for name, _ in _POSITIVE:
        if v[name] < 1:
            raise MiopenCommandError(ft[name], shown[name], "an integer >= 1")
    if is3:
        for name in ("in_d", "fil_d", "conv_stride_d", "dilation_d"):
            if v[name] < 1:
                raise MiopenCommandError(ft[name], shown[name], "an integer >= 1 for a 3-D problem")
    for name in ("pad_h", "pad_w") + (("pad_d",) if is3 else ()):
        if v[name] < 0:
            raise MiopenCommandError(ft[name], shown[name], "an integer >= 0")

    layouts = []
    default = "NCDHW" if is3 else "NCHW"
    allowed = LAYOUTS_3D if is3 else LAYOUTS_2D
    for name in ("in_layout", "out_layout", "fil_layout"):
        lay = v[name] or default
        if lay not in allowed:
            raise MiopenCommandError(ft[name], shown[name], ", ".join(allowed),
                                     f"layout does not match spatial_dim {sdim}")
        layouts.append(lay)

    g = max(v["group_count"], 1)     # MIOpenDriver: std::max(GetValueInt("group_count"), 1)
    if v["in_channels"] % g or v["out_channels"] % g:
        raise MiopenCommandError(ft["group_count"], shown["group_count"],
                                 f"a divisor of both C={v['in_channels']} and K={v['out_channels']}")

    ph, pw, pd = v["pad_h"], v["pad_w"], v["pad_d"]
    one_by_one = v["fil_h"] == 1 and v["fil_w"] == 1 and (not is3 or v["fil_d"] == 1)
    undilated = v["dilation_h"] == 1 and v["dilation_w"] == 1 and (not is3 or v["dilation_d"] == 1)
    if v["mode"] == "conv" and v["pad_mode"] != "default" and (undilated or one_by_one):
        if v["pad_mode"] == "valid":
            ph = pw = pd = 0
        else:
            ph = _same_pad(v["in_h"], v["fil_h"], v["conv_stride_h"])
            pw = _same_pad(v["in_w"], v["fil_w"], v["conv_stride_w"])
            if is3:
                pd = _same_pad(v["in_d"], v["fil_d"], v["conv_stride_d"])
            if undilated:
                _check_same_symmetric(v, ft, shown, (ph, pw) + ((pd,) if is3 else ()))

    kw = dict(
        N=v["batchsize"], C=v["in_channels"], Hi=v["in_h"], Wi=v["in_w"], K=v["out_channels"],
        Y=v["fil_h"], X=v["fil_w"], pH=ph, pW=pw, sH=v["conv_stride_h"], sW=v["conv_stride_w"],
        dH=v["dilation_h"], dW=v["dilation_w"], G=g, dtype=BASE_DTYPES[base],
        in_layout=layouts[0], out_layout=layouts[1], fil_layout=layouts[2], spatial_dim=sdim,
        mode=v["mode"],
        trans_pads=(v["trans_output_pad_d"], v["trans_output_pad_h"], v["trans_output_pad_w"]),
        tf32=BASE_DTYPES[base] == "fp32" and v["math_type"] == MATH_DEFAULT,
    )
    if is3:
        kw.update(Di=v["in_d"], Z=v["fil_d"], pD=pd, sD=v["conv_stride_d"], dD=v["dilation_d"])

    # Derived output sizes: an error where the dilated filter exceeds the padded input. MIOpen
    # computes max(1, (in + 2p - d*(f-1) - 1)/s + 1) in C++ (division toward zero;
    # convolution.cpp GetForwardOutputTensorWithLayout), so it runs such a line with Ho = 1
    # and a window reaching past the input's far edge; the two agree wherever ours is >= 1.
    if v["mode"] == "conv":
        axes = [("Ho", ("in_h", "fil_h", "pad_h", "conv_stride_h", "dilation_h"), ph),
                ("Wo", ("in_w", "fil_w", "pad_w", "conv_stride_w", "dilation_w"), pw)]
        if is3:
            axes.append(("Do", ("in_d", "fil_d", "pad_d", "conv_stride_d", "dilation_d"), pd))
        for axis, names, pad in axes:
            size, filt, _, stride, dil = (v[n] for n in names)
            out = output_size(size, filt, pad, stride, dil)
            if out < 1:
                raise _derived_size_error(axis, names, [size, filt, pad, stride, dil], out, v, ft, shown)
    return ConvProblem(**kw)


def _derived_size_error(axis: str, names: tuple, values: list, out: int, v: dict, ft: dict,
                        shown: dict) -> MiopenCommandError:
    """The error for a derived output size below 1: the size flag is ``flag`` (and its value
    ``value``), and the message names every flag that went into it with its value -- a
    huge ``-y`` or ``-l`` is as much the cause as ``-H`` (``-H 8 with -y 2147483647, -p 0,
    -u 1, -l 1: derived Ho=-2147483638 < 1``); a pad from ``--pad_mode`` says so."""
    size_flag = ft[names[0]]
    parts = []
    for name, value in zip(names[1:], values[1:]):
        if name.startswith("pad") and value != v[name]:
            parts.append(f"pad {value} (from {ft['pad_mode']} {shown['pad_mode']})")
        else:
            parts.append(f"{ft[name]} {shown[name]}")
    letter = {"Ho": "H", "Wo": "W", "Do": "D"}[axis]
    allowed = (f"a dilated filter that fits the padded input, dilation*(filter-1) + 1 <= {letter} + 2*pad "
               f"(a larger {size_flag} or pad, or a smaller filter or dilation)")
    detail = f"derived {axis}={out} < 1"
    err = MiopenCommandError(size_flag, shown[names[0]], allowed, detail)
    err.args = (f"{size_flag} {shown[names[0]]} with {', '.join(parts)}: {detail}; allowed: {allowed}",)
    return err


def format_command(problem: ConvProblem, base: str | None = None, extra: str = "") -> str:
    """An MIOpenDriver line (short flags) that parses back to ``problem`` (``-M 0`` only for
    TF32 math).

    Raises:
        ValueError: ``problem`` is not a :class:`ConvProblem`, or its dtype has no base
            argument this solver parses (int8, fp8, bf8).
    """
    if not isinstance(problem, ConvProblem):
        raise ValueError(f"problem {shown_value(problem)}: allowed: a ConvProblem")
    bases = {v: k for k, v in reversed(list(BASE_DTYPES.items()))}
    if base is None and problem.dtype not in bases:
        raise ValueError(f"dtype {problem.dtype}: no base argument parses it; allowed: {', '.join(bases)}")
    base = base or bases[problem.dtype]
    p = problem
    s = (f"{base} -n {p.N} -c {p.C} -H {p.Hi} -W {p.Wi} -k {p.K} -y {p.Y} -x {p.X} "
         f"-p {p.pH} -q {p.pW} -u {p.sH} -v {p.sW} -l {p.dH} -j {p.dW} -g {p.G} -m {p.mode} "
         f"-F 2 --in_layout {p.in_layout} --out_layout {p.out_layout} --fil_layout {p.fil_layout}")
    if p.is_3d:
        s += (f" -_ 3 -! {p.Di} -@ {p.Z} -$ {p.pD} -# {p.sD} -^ {p.dD}")
    if p.tf32:
        s += f" -M {MATH_DEFAULT}"
    return s + (" " + extra if extra else "")
