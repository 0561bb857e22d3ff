"""Property: any MIOpenDriver line, however mangled, is answered quickly and only with the
library's own errors.

Seeded random lines -- valid-looking ones and mutations of them: integers of thousands of
digits, C int limits, negative and empty values, unicode digits and dashes, repeated,
unknown and value-less flags, huge strides, pads and dilations (with sizes that keep the
output >= 1, so they reach the solver), odd layouts, quoting, prefixes, a whole line as one
argument -- go through ``command.parse`` (+ ``check_supported``) and, for every arch preset,
``DgradSolver().is_applicable`` and, when applicable, ``get_default_performance_config``.

Asserted: parse raises nothing but :class:`MiopenCommandError`; ``is_applicable`` never
raises; an applicable problem always has a default config; the worst single answer (one
line parsed, or one line answered for one arch) takes < 100 ms of this process's CPU time
(``time.process_time``, with the garbage collector paused while measuring), which holds on
a machine 10x slower than the 2-core CI box because the worst answer here is a few ms; and
the calls the 20 slowest answers make, counted by a profiler, stay under a fixed bound (a
measure no machine load can move).

CI runs 20,000 lines (about 20 s). The full run is 100,000 lines::

    DGRAD_FUZZ_LINES=100000 python -m pytest -q tests/test_fuzz_lines.py
"""

from __future__ import annotations

import gc
import os
import random
import shlex
import time

from conftest import count_calls
from miopen_solver.command import FLAGS, check_supported, parse
from miopen_solver.errors import MiopenCommandError
from miopen_solver.solver import DgradSolver
from miopen_solver.spec import cached_decompose
from miopen_solver.target import get_target

LINES = int(os.environ.get("DGRAD_FUZZ_LINES", "20000"))
SEED = int(os.environ.get("DGRAD_FUZZ_SEED", "20261201"))
ARCHS = ("gfx90a", "gfx942", "gfx950", "sm_80", "sm_90", "cpu")
MAX_ANSWER_S = 0.100
MAX_CALLS = 200_000
"""Calls one answer may make (the worst today: about 30,000, an 841-sub-GEMM problem)."""

BASES = ["conv", "convfp16", "convbfp16", "convfp32"]
ODD_BASES = ["convint8", "convfp8", "convbfp8", "convfoo", "Conv", "", "-n"]
LAYOUTS = ["NHWC", "NCHW", "nhwc", "Nhwc", "CHWN", "NCDHW", "NDHWC", "NHCW", "", "N H W C"]
PREFIXES = ["./bin/MIOpenDriver", "MIOpen(HIP): Command [LogCmdConvolution] ./bin/MIOpenDriver", "MIOpenDriver"]
INT_FLAGS = [f for f in FLAGS if f.kind == "int"]
LONG_OF = {"-" + f.short: "--" + f.long for f in FLAGS}


def bad_int(rng: random.Random) -> str:
    """A value an integer flag should refuse or that tests its range."""
    kind = rng.randrange(14)
    if kind == 0:
        return "9" * rng.randint(11, 6000)
    if kind == 1:
        return "-" + "1" * rng.randint(11, 6000)
    if kind == 2:
        return rng.choice(["2147483647", "2147483648", "-2147483648", "-2147483649", "4294967296"])
    if kind == 3:
        return "0" * rng.randint(1, 5000) + str(rng.randint(0, 99))
    if kind == 4:
        return str(-rng.randint(1, 10**6))
    if kind == 5:
        return ""
    if kind == 6:
        return rng.choice(["１２", "٣", "²", "一", "1\u200b", "−1", "1.5", "1e3", "0x10", "1_0", " 1", "1 ", "+", "-"])
    if kind == 7:
        return "".join(rng.choice("ab1-_é\u2028 ") for _ in range(rng.randint(1, 40)))
    if kind == 8:
        return "x" * rng.randint(100, 100_000)
    if kind == 9:
        return str(10 ** rng.randint(3, 9))
    return str(rng.choice([0, 1, 2, 3, 7, 64, 65535, 2**20]))


def shape(rng: random.Random) -> dict:
    """A plausible problem, sometimes with huge strides, pads or dilations that still give
    an output of at least 1 (so the line reaches the solver)."""
    g = rng.choice([1, 1, 1, 2, 4, 32])
    cpg, kpg = rng.choice([1, 2, 3, 8, 16, 64, 256]), rng.choice([1, 4, 8, 16, 64, 512])
    v = {"-n": rng.choice([1, 2, 8, 32, 128, 256]), "-c": g * cpg, "-k": g * kpg, "-g": g,
         "-y": rng.choice([1, 1, 3, 3, 5, 7, 11, 29, 30]), "-x": rng.choice([1, 1, 3, 3, 5, 7, 11, 29, 30]),
         "-u": rng.choice([1, 1, 2, 3, 4]), "-v": rng.choice([1, 1, 2, 3, 4]),
         "-l": rng.choice([1, 1, 2, 3]), "-j": rng.choice([1, 1, 2, 3]),
         "-p": rng.choice([0, 0, 1, 2, 3]), "-q": rng.choice([0, 0, 1, 2, 3])}
    if rng.random() < 0.3:                       # a huge value that still gives Ho, Wo >= 1
        axis = rng.choice([("-u", "-y", "-p", "-l"), ("-v", "-x", "-q", "-j")])
        what = rng.choice(["stride", "pad", "dilation", "stride", "all"])
        big = lambda: rng.choice([10**4, 10**5, 10**6, 10**9, 2**31 - 1, rng.randint(30, 10**7)])  # noqa: E731
        if what in ("stride", "all"):
            v[axis[0]] = big()
            if rng.random() < 0.3:
                v[axis[1]] = rng.choice([29, 30, 31])
        if what in ("pad", "all"):
            v[axis[2]] = big() // 4
        if what in ("dilation", "all"):
            v[axis[3]] = big()
    if rng.random() < 0.03:                      # many tilde phases on both axes (up to 31 x 31)
        v["-y"], v["-x"] = rng.choice([27, 29, 30, 31]), rng.choice([27, 29, 30, 31])
        v["-u"], v["-v"] = rng.choice([29, 30, 31, 10**5]), rng.choice([29, 30, 31, 10**5])
    for size, filt, pad, dil in (("-H", "-y", "-p", "-l"), ("-W", "-x", "-q", "-j")):
        need = max(1, v[dil] * (v[filt] - 1) + 1 - 2 * v[pad])
        v[size] = need + rng.choice([0, 0, 1, 5, 27, 200]) if need < 10**6 else rng.choice([1, 2, need])
    return v


def valid_line(rng: random.Random) -> list:
    v = shape(rng)
    tokens = [rng.choice(BASES)]
    for flag, value in v.items():
        tokens += [LONG_OF[flag] if rng.random() < 0.2 else flag, str(value)]
    tokens += ["-F", "2" if rng.random() < 0.9 else rng.choice(["0", "1", "3", "4", "6", "8", "-2"])]
    r = rng.random()
    lay = "NHWC" if r < 0.7 else rng.choice(["NCHW", "nhwc", "Nhwc", ""]) if r < 0.95 else rng.choice(LAYOUTS)
    for flag in ("--in_layout", "--out_layout", "--fil_layout"):
        tokens += [flag, lay if rng.random() < 0.95 else rng.choice(LAYOUTS)]
    if rng.random() < 0.1:
        tokens += ["-m", rng.choice(["conv", "trans"])]
    if rng.random() < 0.05:
        tokens += ["-_", "3"]
    if rng.random() < 0.1:
        tokens += [rng.choice(["-Z", "-L", "-G", "-U", "-S", "-V", "-t", "-i"]), rng.choice(["0", "1", "4", "-1", "fp16"])]
    return tokens


def mutate(rng: random.Random, tokens: list) -> list:
    tokens = list(tokens)
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        op = rng.randrange(12)
        values = [i for i in range(2, len(tokens), 2)]
        if op <= 2 and values:                                   # a bad integer somewhere
            tokens[rng.choice(values)] = bad_int(rng)
        elif op == 3:                                            # a repeated flag, last one wins
            f = rng.choice(INT_FLAGS)
            tokens += ["-" + f.short, bad_int(rng) if rng.random() < 0.5 else "1", "-" + f.short, bad_int(rng)]
        elif op == 4:                                            # an unknown flag
            tokens += [rng.choice(["-Q", "--nope", "-" + "é", "--", "-nn", "---n", "--pad_h=1"]), "1"]
        elif op == 5 and len(tokens) > 1:                        # a missing value / a dropped token
            del tokens[rng.randrange(1, len(tokens))]
        elif op == 6:                                            # an odd layout
            tokens += [rng.choice(["--in_layout", "-O", "--fil_layout"]), rng.choice(LAYOUTS)]
        elif op == 7:                                            # a flag without its value at the end
            tokens.append(rng.choice(["-n", "--in_layout", "-F", "-S"]))
        elif op == 8:                                            # an odd base argument
            tokens[0] = rng.choice(ODD_BASES)
        elif op == 9:                                            # unicode in a flag
            tokens.insert(rng.randrange(1, len(tokens) + 1), rng.choice(["－n", "—F", "\u2028", "\x00", "-\u0301"]))
        elif op == 10 and values:                                # a huge value on a geometry flag
            tokens += [rng.choice(["-u", "-v", "-p", "-q", "-l", "-j", "-y", "-x"]), str(10 ** rng.randint(4, 9))]
        else:                                                    # a log prefix
            tokens = rng.choice(PREFIXES).split() + tokens
    return tokens


def line_forms(rng: random.Random):
    """One generated line in one of the forms a caller may pass: tokens, a shell string, a
    single token holding the whole line, or a string with an unbalanced quote."""
    tokens = mutate(rng, valid_line(rng)) if rng.random() < 0.5 else valid_line(rng)
    form = rng.randrange(10)
    if form < 6:
        return tokens
    text = " ".join(shlex.quote(t) for t in tokens)
    if form < 8:
        return text
    if form == 8:
        return [text]
    return text + rng.choice([' "', " '", " \\"])


def test_generated_lines_answer_fast_and_only_with_library_errors():
    rng = random.Random(SEED)
    targets = {a: get_target(a) for a in ARCHS}
    solver = DgradSolver()
    stats = dict(lines=0, parsed=0, refused=0, answers=0, applicable=0)
    slowest = []                                  # (seconds, what, line, arch)
    unexpected = []

    def timed(fn):
        t0 = time.process_time()
        out = fn()
        return out, time.process_time() - t0

    gc.collect()
    gc.disable()
    try:
        for n in range(LINES):
            if n % 2000 == 0:
                gc.enable()
                gc.collect()
                gc.disable()
            line = line_forms(rng)
            any_direction = rng.random() < 0.5
            stats["lines"] += 1

            def do_parse():
                cmd = parse(line, allow_any_direction=any_direction)
                check_supported(cmd)
                return cmd
            try:
                cmd, dt = timed(do_parse)
            except MiopenCommandError:
                stats["refused"] += 1
                continue
            except Exception as e:                # noqa: BLE001 - the property under test
                unexpected.append(("parse", type(e).__name__, str(e)[:200], str(line)[:300]))
                continue
            slowest.append((dt, "parse", line, None))
            stats["parsed"] += 1
            forw = cmd.flags["forw"]
            for arch, target in targets.items():
                def answer():
                    verdict = solver.is_applicable(cmd.problem, target, forw=forw)
                    if verdict.ok:
                        solver.get_default_performance_config(cmd.problem, target)
                    return verdict.ok
                try:
                    ok, dt = timed(answer)
                except Exception as e:            # noqa: BLE001
                    unexpected.append((arch, type(e).__name__, str(e)[:200], str(line)[:300]))
                    continue
                stats["answers"] += 1
                stats["applicable"] += ok
                slowest.append((dt, "answer", line, arch))
            if len(slowest) > 4000:
                slowest = sorted(slowest, key=lambda r: -r[0])[:40]
    finally:
        gc.enable()
    slowest = sorted(slowest, key=lambda r: -r[0])[:20]
    print(f"\nfuzz lines: {stats}; slowest answer {slowest[0][0] * 1e3:.2f} ms "
          f"({slowest[0][1]}, {slowest[0][3]}): {str(slowest[0][2])[:160]}")
    assert not unexpected, unexpected[:5]
    assert stats["lines"] == LINES and stats["parsed"] > LINES // 5 and stats["applicable"] > LINES // 10
    assert slowest[0][0] < MAX_ANSWER_S, slowest[:3]

    # The same worst answers, counted in calls rather than seconds.
    most = 0
    for _, what, line, arch in slowest:
        cmd = parse(line, allow_any_direction=True)
        if what == "parse":
            _, calls = count_calls(lambda: check_supported(parse(line, allow_any_direction=True)))
        else:
            def answer():
                cached_decompose.cache_clear()            # count the decomposition too
                if solver.is_applicable(cmd.problem, targets[arch], forw=cmd.flags["forw"]):
                    solver.get_default_performance_config(cmd.problem, targets[arch])
            _, calls = count_calls(answer)
        most = max(most, calls)
        assert calls < MAX_CALLS, (what, arch, calls, str(line)[:200])
    print(f"most calls of the 20 slowest answers: {most}")
