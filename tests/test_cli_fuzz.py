"""CLI fuzz: bad input in every mode is exit 2 and exactly ONE stderr line
``dgrad-driver: error: ...`` naming the flag or path (its value cut), nothing on stdout and
no traceback anywhere. About 200 invocations of ``driver.cli.main`` in this process (no
subprocess, no worker: a worker start fails the test), from a fixed list of mutations of a
valid line, each in every mode, plus seeded random combinations of them.

Also here: the flags a run refuses are refused the same way by every mode, a whole line
given as one quoted argument works everywhere, and batch reads line 1 after a byte-order
mark, breaks lines at "\\n" only and turns a huge value into one error row.
"""

from __future__ import annotations

import json
import random

import pytest

from driver import workers
from driver.cli import main

NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
LINE = f"convfp16 -n 2 -c 8 -H 9 -W 7 -k 8 -y 3 -x 3 -p 1 -q 1 -u 2 -v 1 -l 1 -j 1 -g 1 -F 2 -t 1 {NHWC}"
HUGE = "9" * 5000
LONG = "x" * 10_000
MODES = {
    "run": ["run", "--backend", "cpu"],
    "default": [],                                    # a line without a subcommand runs
    "tune": ["tune", "--backend", "cpu", "--list"],
    "applicable": ["applicable"],
    "config": ["config"],
}
LONGEST_LINE = 400
"""An error line names the flag, the value cut to about 60 characters and what is allowed."""

# (extra tokens appended to LINE, text the error line must hold)
MUTATIONS = [
    (["-n", HUGE], "-n '99999"), (["-n", "-" + HUGE], "out of range"), (["-u", "2147483648"], "-u '2147483648'"),
    (["--conv_stride_h", "1" + "0" * 4300], "--conv_stride_h"), (["-l", "99999999999"], "-l "),
    (["-p", "-1"], "-p '-1'"), (["-n", "0"], "-n '0'"), (["-u", "0"], "-u '0'"), (["-n", ""], "-n ''"),
    (["-n", "１２"], "-n '１２'"), (["-c", "٣"], "-c"), (["-n", "1.5"], "-n '1.5'"), (["-k", "0x10"], "-k"),
    (["-Q", "1"], "-Q: unknown flag"), (["--nope", "1"], "--nope: unknown flag"), (["-n"], "-n <missing>"),
    (["-n", "4", "-n", "x"], "-n 'x'"), (["--in_layout", "XYZW"], "--in_layout 'XYZW'"),
    (["--in_layout", "NCDHW"], "--in_layout"), (["-m", "xyz"], "-m 'xyz'"), (["-z", "bad"], "-z 'bad'"),
    (["-g", "3"], "-g '3'"), (["-y", "99"], "-H 9 with -y 99"), (["-_", "4"], "-_ '4'"), (["-Z", "1"], "-Z '1'"),
    (["-L", "4"], "-L '4'"), (["-G", "1"], "-G '1'"), (["-U", "fp16"], "-U 'fp16'"), (["-S", "999"], "-S '999'"),
    (["-n", LONG], "(10000 characters)"), (["--" + LONG, "1"], "(10002 characters)"), (["-" + LONG], "characters"),
    (["stray"], "stray: not a flag"), (["--in_layout=NHWC"], "--in_layout=NHWC"), (["-i", "0"], "-i '0'"),
    (["--arch", "bogus"], "--arch bogus"), (["--arch", ""], "--arch"), (["--arch", LONG], "(10000 characters)"),
]
BAD_LINES = [
    (["convint8 -n 1 -F 2"], "<base>"), (["convfoo", "-n", "1"], "<base> 'convfoo'"), ([LINE + ' -n "2'], "<line>"),
    ([LINE + " -n " + HUGE], "-n '9999"), ([LINE + " -Z 1"], "-Z '1'"), ([LONG], "<base>"), ([f"conv{LONG} -F 2"], "<base>"),
    ([LINE.replace("-n 2", "-n 2 -n")], "-n"),
]
RANDOM_FLAGS = ["-n", "-c", "-H", "-W", "-k", "-y", "-x", "-p", "-q", "-u", "-v", "-l", "-j", "-g",
                "--batchsize", "--pad_h", "--dilation_w", "--conv_stride_w", "-i"]
RANDOM_VALUES = [HUGE, "-" + HUGE, "2147483648", "-2147483649", "", "x", "１", "1e3", "0x1", " 1", "+", LONG]


def random_cases(n=30, seed=20261201):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        flag, value = rng.choice(RANDOM_FLAGS), rng.choice(RANDOM_VALUES)
        mode = rng.choice(sorted(MODES))
        out.append((mode, LINE.split() + [flag, value], flag))
    return out


CASES = ([(mode, LINE.split() + extra, needle) for mode in MODES for extra, needle in MUTATIONS]
         + [(mode, line, needle) for mode in MODES for line, needle in BAD_LINES]
         + random_cases())


@pytest.fixture(autouse=True)
def no_workers(monkeypatch, tmp_path):
    def no(*a, **k):
        raise AssertionError("a worker was started")
    monkeypatch.setattr(workers.Worker, "start", no)
    monkeypatch.setenv("MIOPEN_DGRAD_PERFDB", str(tmp_path / "perfdb.sqlite"))


def run(capsys, args):
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def assert_one_error(status, out, err, needle=None):
    assert "Traceback" not in out + err
    lines = err.splitlines()
    assert status == 2, (status, err[:300], out[:300])
    assert out == "" and len(lines) == 1, (out[:300], err[:600])
    assert lines[0].startswith("dgrad-driver: error: ")
    assert len(lines[0]) < LONGEST_LINE, lines[0][:300]
    if needle is not None:
        assert needle in lines[0], (needle, lines[0])


def test_there_are_enough_cases():
    assert len(CASES) >= 150


@pytest.mark.parametrize("mode,tokens,needle", CASES, ids=[f"{i}-{c[0]}" for i, c in enumerate(CASES)])
def test_bad_input_is_one_error_line(capsys, mode, tokens, needle):
    assert_one_error(*run(capsys, MODES[mode] + tokens), needle)


# ------------------------------------------------------------------ our own options, paths
OPTION_CASES = [
    (["run", "--backend", "cpu", *LINE.split(), "--perf-config", LONG], "--perf-config"),
    (["run", "--backend", "cpu", *LINE.split(), "--perf-config", "1,2,x"], "--perf-config '1,2,x'"),
    (["config", *LINE.split(), "--perf-config", HUGE], "--perf-config"),
    (["config", *LINE.split(), "--perf-config", "a b " * 2000], "--perf-config"),
    (["run", "--backend", "cpu", *LINE.split(), "--split-k", HUGE], "--split-k"),
    (["config", *LINE.split(), "--split-k", LONG], "--split-k"),
    (["config", *LINE.split(), "--split-k", "0"], "--split-k 0"),
    (["run", "--backend", "cpu", *LINE.split(), "--kouter", LONG], "--kouter"),
    (["run", "--backend", "cpu", *LINE.split(), "--timeout", LONG], "--timeout"),
    (["run", "--backend", "cpu", *LINE.split(), "--timeout", "inf"], "--timeout inf"),
    (["run", "--backend", "cpu", *LINE.split(), "--warmup", HUGE], "--warmup"),
    (["run", "--backend", LONG, *LINE.split()], "--backend"),
    (["applicable", *LINE.split(), "--perf-config", "1"], "--perf-config"),
    (["applicable", "--arch", "a b " * 3000, *LINE.split()], "--arch"),
    (["batch", "/nonexistent/" + LONG], "FILE"), (["batch", LONG], "FILE"), (["batch", "/"], "FILE /: is a directory"),
    (["batch", "/dev/null", "--batch-size", HUGE], "--batch-size"), (["batch", "/dev/null", "--iters", "0"], "--iters"),
    (["replay", "/nonexistent/" + LONG], "cannot read"), (["replay", "fixtures", "--only", LONG], "no fixture id"),
    (["perfdb", "import", "/nonexistent/" + LONG, "--arch", "gfx942"], "FILE"),
    (["config", *LINE.split(), "--perfdb", "/nonexistent/" + LONG, "--perf-config", "x"], "--perf-config"),
    (["tune", "--backend", "cpu", *LINE.split(), "--perfdb", "/nonexistent/" + LONG], "perf-db"),
    ([LONG], None), (["--" + LONG], None),
]


@pytest.mark.parametrize("args,needle", OPTION_CASES, ids=[str(i) for i in range(len(OPTION_CASES))])
def test_bad_options_and_paths_are_one_error_line(capsys, args, needle):
    assert_one_error(*run(capsys, args), needle)


def test_a_long_perfdb_path_that_is_only_read_is_one_warning(capsys):
    # config reads the perf-db: a path the OS refuses (name too long) is one warning line
    # and the default config, not an OSError traceback.
    status, out, err = run(capsys, ["config", *LINE.split(), "--perfdb", "/nonexistent/" + LONG])
    lines = err.splitlines()
    assert status == 0 and len(lines) == 1 and lines[0].startswith("dgrad-driver: warning: ")
    assert "File name too long" in lines[0] and "(10013 characters)" in lines[0] and "Traceback" not in out + err


# ------------------------------------------------------------------ one check for every mode
REFUSED = [(["-Z", "1"], "-Z '1': vectorized tensors"), (["-L", "4"], "-L '4': a vector length"),
           (["-G", "1", "-V", "1"], "-G '1': '--gpualloc 1'"), (["--in_cast_type", "fp16"], "--in_cast_type 'fp16'"),
           (["-T", "bf16"], "-T 'bf16': cast types")]


@pytest.mark.parametrize("extra,needle", REFUSED)
def test_what_a_run_refuses_every_mode_refuses(capsys, tmp_path, extra, needle):
    for mode in MODES:
        assert_one_error(*run(capsys, MODES[mode] + LINE.split() + extra), needle)
    path = tmp_path / "lines.txt"
    path.write_text(LINE + " " + " ".join(extra) + "\n")
    status, out, err = run(capsys, ["batch", str(path), "--backend", "cpu"])
    row = out.splitlines()[2]
    assert status == 1 and "error" in row and needle in row and err == ""


# ------------------------------------------------------------------ a whole line as one argument
@pytest.mark.parametrize("mode", ["applicable", "config", "tune"])
def test_a_quoted_whole_line_with_options_after_it(capsys, mode):
    args = MODES[mode] + [LINE, "--json"]
    status, out, err = run(capsys, args)
    assert status == 0 and err == "", err
    doc = json.loads(out)
    if mode == "applicable":
        assert doc["applicable"] is True
    elif mode == "config":
        assert doc["valid"] is True and doc["kernel_name"].startswith("dgrad_gfx942_fp16")
    else:
        assert isinstance(doc, list) and doc


def test_a_quoted_whole_line_answers_what_the_tokens_answer(capsys):
    for mode in ("applicable", "config"):
        a = run(capsys, [mode, LINE, "--json", "--arch", "sm_90"])
        b = run(capsys, [mode, *LINE.split(), "--json", "--arch", "sm_90"])
        assert a == b and a[0] == 0


# ------------------------------------------------------------------ batch files
def test_batch_reads_line_one_after_a_bom_and_breaks_at_newline_only(capsys, tmp_path):
    """Line 1 after a byte-order mark is a command (it was ignored); U+2028, U+0085 and a
    form feed inside a comment do not start new lines (they shifted every line number); a
    5000-digit value is one error row (it aborted the batch and lost every row)."""
    text = ("\ufeff" + LINE + " -n " + HUGE + "\n"
            + LINE + " -Z 1  # a note\u2028with\u0085odd\x0cbreaks\n"
            + LINE.replace("-F 2", "-F 1") + "\r\n"
            + "# comment\n")
    path = tmp_path / "lines.txt"
    path.write_bytes(text.encode("utf-8"))
    status, out, err = run(capsys, ["batch", str(path), "--backend", "cpu"])
    rows = [r.split() for r in out.splitlines()[2:-1]]
    assert status == 1 and err == ""
    assert [r[0] for r in rows] == ["1", "2", "3"], out
    assert "out of range" in out.splitlines()[2] and "-Z '1'" in out.splitlines()[3]
    assert "skipped" in out.splitlines()[4]
    assert out.splitlines()[-1] == "Summary: 1 skipped, 2 error"


def test_batch_line_numbers_follow_newlines(capsys, tmp_path):
    # every odd break character inside a skipped line: the numbering stays that of "\n"
    breaks = "\u2028\u2029\u0085\x0c\x0b\x1c\x1d\x1e"
    lines = [LINE + " -Z 1" + ("  # " + ch if i else "") for i, ch in enumerate(breaks)]
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    status, out, _ = run(capsys, ["batch", str(path), "--backend", "cpu"])
    rows = out.splitlines()[2:-1]
    assert status == 1 and [r.split()[0] for r in rows] == [str(i + 1) for i in range(len(breaks))]
