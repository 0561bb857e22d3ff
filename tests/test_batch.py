"""``dgrad-driver batch`` over MIOpen perf-model files and MIOPEN_ENABLE_LOGGING_CMD logs
(CPU engine, --batch-size 1 so real network lines stay small)."""

from __future__ import annotations

import csv
import os
import re

import pytest

from conftest import ROOT
from driver import workers
from driver.batch_cmd import CSV_FIELDS, command_tokens
from driver.cli import main
from miopen_solver import prng
from miopen_solver.command import parse
from miopen_solver.perfdb import ENV_VAR as PERFDB_ENV
from miopen_solver.solver import DgradSolver
from miopen_solver.target import get_target

DATA = os.path.join(ROOT, "tests", "data", "perf_models")
MOBILENET = os.path.join(DATA, "Mobilenet_v1_FP32_BS64.txt")
RESNET = os.path.join(DATA, "Resnet50_v1.5_FP16_BS256.txt")
SHUFFLENET = os.path.join(DATA, "Shufflenet_v2_FP16_BS128.txt")


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    for name in (prng.SEED_ENV, workers.CRASH_ENV, workers.PRELOAD_ENV, workers.TIMEOUT_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(PERFDB_ENV, str(tmp_path / "perfdb.sqlite"))


def run(capsys, *args):
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out.splitlines(), err.splitlines()


def table_rows(out):
    """The table's data rows as {line: [fields]} (fields split on runs of 2+ spaces)."""
    start = next(i for i, x in enumerate(out) if x.split()[:3] == ["line", "problem_key", "applicable"])
    rows = {}
    for x in out[start + 1:]:
        if x.startswith("Summary:"):
            break
        fields = re.split(r"\s{2,}", x.strip())
        rows[int(fields[0])] = fields
    return rows


def forw_of(text):
    return int(text.split("--forw")[1].split()[0])


def file_lines(path, count):
    with open(path) as fh:
        return [(n, ln.strip()) for n, ln in enumerate(fh, 1)][:count]


def test_command_tokens():
    log = ("MIOpen(HIP): Command [LogCmdConvolution] ./bin/MIOpenDriver conv -n 128 -c 3 -H 32 -W 32 -k 8 "
           "-y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -m conv -g 1 -F 2 -t 1 -S 86")
    assert command_tokens(log) == ("conv -n 128 -c 3 -H 32 -W 32 -k 8 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 "
                                   "-m conv -g 1 -F 2 -t 1").split()
    assert command_tokens("./bin/MIOpenDriver convbfp16 --solution ConvX -n 2")[:3] == ["convbfp16", "-n", "2"]
    assert command_tokens("MIOpen(HIP): Info [Find] nothing here") is None


TINY = "convfp16 -n 1 -c 8 -H 4 -W 4 -k 8 -y 1 -x 1 -F 2 -i 1"

MISTYPED = ["convbf16", "CONVFP16", "convfp17", "Conv", "convfp16x"]


@pytest.mark.parametrize("where", ["./bin/MIOpenDriver {base}", "MIOpen(HIP): Command [LogCmdConvolution] "
                                   "./bin/MIOpenDriver {base}", "{base}"])
def test_a_mistyped_conv_base_is_an_error_row_not_an_ignored_line(capsys, tmp_path, where):
    """A conv command whose base argument is no known one (after the MIOpenDriver program, or
    first on the line before a conv flag) is refused as run refuses it: an error row, exit 1. Lines
    of other MIOpenDriver bases and log text that only mentions a conv word stay ignored."""
    flags = TINY.split(" ", 1)[1]
    lines = [f"{where.format(base=b)} {flags}" for b in MISTYPED]
    lines += ["./bin/MIOpenDriver pool -n 2 -c 8", "conversion took 3 s", "converting -the weights", TINY]
    f = tmp_path / "f.txt"
    f.write_text("\n".join(lines) + "\n")
    status, out, _ = run(capsys, "batch", str(f), "--backend", "cpu")
    rows = table_rows(out)
    assert status == 1 and sorted(rows) == list(range(1, len(MISTYPED) + 1)) + [len(lines)]
    for n, base in enumerate(MISTYPED, 1):
        assert rows[n][-2:] == ["error", f"<base> '{base}': unknown base argument; allowed: conv, convfp32, "
                                         "convfp16, convbfp16"], rows[n]
        assert command_tokens(lines[n - 1])[0] == base
    assert rows[len(lines)][-1] == "ok" or rows[len(lines)][-2] == "ok"
    assert out[-1].endswith("; 3 lines without a MIOpenDriver conv command (or a Find call's log line) ignored")


def csv_rows(path):
    with open(path, newline="") as fh:
        return {int(r["line"]): r for r in csv.DictReader(fh)}


@pytest.mark.parametrize("bad", [f"{TINY} 'unterminated", f'{TINY} -n "1', f"{TINY} \\",
                                 f"./bin/MIOpenDriver {TINY} --in_layout 'NHWC"])
def test_a_line_that_cannot_be_split_says_what_run_says(capsys, tmp_path, bad):
    """batch split such a line at whitespace and said "'unterminated: not a flag (values
    follow their flag)"; run says "cannot split the line: No closing quotation". The row now
    carries run's own error line; text before the base argument may hold quotes (log text)."""
    status, out, err = run(capsys, "run", bad.removeprefix("./bin/MIOpenDriver "), "--backend", "cpu")  # from the base
    assert status == 2 and out == [] and len(err) == 1 and "cannot split the line: " in err[0]
    expected = err[0].removeprefix("dgrad-driver: error: ")
    f = tmp_path / "lines.txt"
    f.write_text(f"{bad}\nMIOpen(HIP): it's ./bin/MIOpenDriver {TINY}\nsome log text that's not a command\n")
    status, out, err = run(capsys, "batch", str(f), "--backend", "cpu", "--no-verify", "--csv", str(tmp_path / "b.csv"))
    rows = csv_rows(tmp_path / "b.csv")
    assert status == 1 and sorted(rows) == [1, 2]
    assert rows[1]["status"] == "error" and rows[1]["note"] == expected
    assert rows[2]["status"] == "ok"
    assert out[-2] == ("Summary: 1 ok, 1 error; 1 lines without a MIOpenDriver conv command (or a Find call's log "
                       "line) ignored")


@pytest.mark.parametrize("flags,note", [
    ("-s 1", "'-s 1' ignored: batch runs no search (run or tune the line)"),
    ("--search 1", "'--search 1' ignored: batch runs no search (run or tune the line)"),
    ("-o 1", "'-o 1' ignored: batch writes no dump files"),
    ("-o 1 -s 01", "'-s 01' ignored: batch runs no search (run or tune the line); '-o 1' ignored: batch writes "
                   "no dump files"),
    ("-s 0 -o 0", ""),
])
def test_search_and_dumps_are_noted_in_the_row(capsys, tmp_path, monkeypatch, flags, note):
    """batch ignored -s 1 and -o 1 silently (only -S is documented as ignored): no search ran,
    no dump file was written, and the row did not say so."""
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "lines.txt"
    f.write_text(f"{TINY} {flags} -S 1000\n")
    status, out, err = run(capsys, "batch", str(f), "--backend", "cpu", "--no-verify", "--csv", str(tmp_path / "b.csv"))
    row = csv_rows(tmp_path / "b.csv")[1]
    assert status == 0 and row["status"] == "ok" and row["note"] == note
    assert (table_rows(out)[1][-1] == note) if note else table_rows(out)[1][-1] == "ok"
    assert not list(tmp_path.glob("dump_*")) and not any("Search" in x for x in out)
    assert row["config_source"] == "default"                 # no search winner was stored and used


def test_perf_model_file(capsys, tmp_path):
    out_csv = tmp_path / "mobilenet.csv"
    # --max-lines counts lines that ran: 3 backward lines are lines 1, 5 and 8 of the file
    status, out, err = run(capsys, "batch", MOBILENET, "--backend", "cpu", "--batch-size", "1", "--iters", "2",
                           "--max-lines", "3", "--csv", str(out_csv))
    assert status == 0 and err == []
    # the heading is printed before any line runs: it counts the file's commands (62) and says
    # --max-lines; the rows listed (8) follow one by one
    with open(MOBILENET) as fh:
        commands = sum(command_tokens(x) is not None for x in fh)
    assert out[0] == f"Batch {MOBILENET}: {commands} commands on cpu (cpu, cpu (numpy engine)), -n 1, --max-lines 3"
    rows = table_rows(out)
    lines = file_lines(MOBILENET, 8)
    assert sorted(rows) == [n for n, _ in lines]
    t = get_target("cpu")
    n_bwd = 0
    for n, text in lines:
        fields = rows[n]
        if forw_of(text) != 2:
            assert fields[1:] == ["-", "-", "-", "-", "-", "skipped", fields[-1]]
            assert fields[-1].startswith(f"-F {forw_of(text)}: ")
            continue
        n_bwd += 1
        p = parse(text.split(" ", 1)[1] + " -n 1").problem            # the line with -n 1, all NCHW
        sol = DgradSolver().get_solution(p, t)
        # dY and (but 1x1) W transposed before the kernel; dX (NCHW) stored NCHW by it
        assert sol.kernel_name.endswith("+transpose_dy_w" if p.Y * p.X > 1 else "+transpose_dy")
        assert "_dxnchw_" in sol.kernel_name
        assert fields[1:4] == [p.problem_key(), "yes", sol.kernel_name]
        assert float(fields[4]) > 0 and fields[5:7] == ["OK", "ok"]
        assert p.problem_key().endswith("-NCHW-FP32-B") and p.N == 1
    assert n_bwd == 3
    assert out[-2] == f"Summary: {n_bwd} ok, {8 - n_bwd} skipped"
    with open(out_csv, newline="") as fh:
        recs = list(csv.DictReader(fh))
    assert list(recs[0]) == list(CSV_FIELDS) and [int(r["line"]) for r in recs] == [n for n, _ in lines]
    assert sum(r["status"] == "ok" for r in recs) == n_bwd
    assert all(r["config_source"] == "default" for r in recs if r["status"] == "ok")


def test_mixed_and_nchw_lines_run(capsys, tmp_path):
    """Resnet50 lines set only --out_layout: NHWC lines are mixed (dX and W NCHW, dY NHWC),
    the others all-NCHW; both run, on the CPU target and on a GPU target (simulated on the
    CPU engine), through layout transforms around the NHWC kernel."""
    with open(RESNET) as fh:
        all_lines = [ln.strip() for ln in fh]
    mixed = next(ln for ln in all_lines if forw_of(ln) == 2 and "--out_layout NHWC" in ln)
    nchw = next(ln for ln in all_lines if forw_of(ln) == 2 and "--out_layout NCHW" in ln)
    two = tmp_path / "two.txt"
    two.write_text(f"{mixed}\n{nchw}\n")
    status, out, _ = run(capsys, "batch", str(two), "--backend", "cpu", "--batch-size", "1", "--iters", "1",
                         "--no-verify")
    rows = table_rows(out)
    assert status == 0
    assert rows[1][2] == "yes" and rows[1][-2:] == ["off", "ok"] and "+transpose_" in rows[1][3]
    assert rows[2][2] == "yes" and rows[2][-2:] == ["off", "ok"] and "+transpose_" in rows[2][3]
    status, out, _ = run(capsys, "batch", str(two), "--backend", "cpu", "--arch", "gfx942", "--batch-size", "1",
                         "--iters", "1")
    rows = table_rows(out)
    assert status == 0 and rows[1][-2:] == ["OK", "ok"] and rows[2][-2:] == ["OK", "ok"]


def test_logging_cmd_file_with_a_crash(capsys, monkeypatch, tmp_path):
    ok1 = "conv -n 2 -c 8 -H 6 -W 6 -k 4 -y 3 -x 3 -p 1 -q 1 -F 2 -t 1"
    ok2 = "convfp16 -n 1 -c 4 -H 5 -W 5 -k 8 -y 1 -x 1 -F 2 -t 1 -S 86 -V 0"
    log = tmp_path / "miopen.log"
    log.write_text("\n".join([
        "MIOpen(HIP): Info [GetForwardSolutions] nothing to run",                       # 1 ignored
        f"MIOpen(HIP): Command [LogCmdConvolution] ./bin/MIOpenDriver {ok1}",           # 2 ok
        "MIOpen(HIP): Command [LogCmdConvolution] ./bin/MIOpenDriver conv -n 2 -F 1 -t 1",  # 3 skipped
        "",
        "# a comment",
        f"MIOpen(HIP): Command [LogCmdConvolution] ./bin/MIOpenDriver {ok2}",           # 6 ok, -S ignored
        "MIOpen(HIP): Command [LogCmdConvolution] ./bin/MIOpenDriver convint8 -n 2 -F 2",  # 7 error
        "MIOpen(HIP): Command [LogCmdConvolution] ./bin/MIOpenDriver conv -n 2 -F 2 -Q 1",  # 8 error
        f"MIOpen(HIP): Command [LogCmdFindConvolution] ./bin/MIOpenDriver {ok1}",       # 9 Find call: ignored
        f"it's MIOpen(HIP): Command [LogCmdFindConvolution] ./bin/MIOpenDriver {ok1}",  # 10 also with a stray quote
    ]) + "\n")
    status, out, _ = run(capsys, "batch", str(log), "--backend", "cpu")
    rows = table_rows(out)
    p1 = parse(ok1).problem
    assert status == 1 and sorted(rows) == [2, 3, 6, 7, 8]
    assert rows[2][-2:] == ["OK", "ok"] and rows[2][3] == DgradSolver().get_solution(p1, get_target("cpu")).kernel_name
    assert rows[3][-2] == "skipped" and rows[6][-2:] == ["off", "ok"]
    assert rows[7][-2] == "error" and "int8" in rows[7][-1] and rows[8][-2] == "error" and "-Q" in rows[8][-1]
    assert out[-1] == ("Summary: 2 ok, 1 skipped, 2 error; 3 lines without a MIOpenDriver conv command (or a Find "
                       "call's log line) ignored")

    # a worker crash costs only its own line
    p, t = parse(ok1).problem, get_target("cpu")
    monkeypatch.setenv(workers.CRASH_ENV, DgradSolver().get_default_performance_config(p, t).serialize())
    status, out, _ = run(capsys, "batch", str(log), "--backend", "cpu")
    rows = table_rows(out)
    assert status == 1 and rows[2][-2] == "failed" and "killed by SIGABRT" in rows[2][-1]
    assert rows[6][-1] == "ok"


def test_batch_user_errors(capsys, tmp_path):
    for args, needle in ((["/nonexistent/file.txt"], "FILE /nonexistent/file.txt"),
                         ([MOBILENET, "--batch-size", "0"], "--batch-size 0"),
                         ([MOBILENET, "--iters", "0"], "--iters 0"),
                         ([MOBILENET, "--csv", "/nonexistent/x.csv"], "--csv /nonexistent/x.csv")):
        status, out, err = run(capsys, "batch", *args, "--backend", "cpu")
        assert status == 2 and out == [] and len(err) == 1 and needle in err[0]


def test_shufflenet_first_backward_lines_verify(capsys):
    with open(SHUFFLENET) as fh:
        first = next(n for n, ln in enumerate(fh, 1) if forw_of(ln) == 2)
    status, out, _ = run(capsys, "batch", SHUFFLENET, "--backend", "cpu", "--batch-size", "1", "--iters", "1",
                         "--max-lines", "1")
    rows = table_rows(out)
    assert status == 0 and rows[first][-2:] == ["OK", "ok"]


def test_each_lines_use_hip_graph_flag_sets_how_it_is_timed(capsys, timing_graph_flags, tmp_path):
    """A batch line's -J 1 (--use_hip_graph 1) times it as replays of a captured graph, as
    ``run -t 1`` and ``tune`` time that line (batch timed every line as plain launches)."""
    seen = timing_graph_flags
    line = "convfp16 -n 1 -c 8 -H 5 -W 5 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2 -i 2"
    f = tmp_path / "lines.txt"
    f.write_text(f"{line}\n{line} -J 1\n{line} --use_hip_graph 0\n{line} --use_hip_graph 1\n")
    status, out, _ = run(capsys, "batch", str(f), "--backend", "cpu", "--no-verify")
    assert status == 0 and seen == [False, True, False, True], (seen, out)


def test_the_table_columns_line_up_whatever_the_kernel_names(capsys, tmp_path):
    # Rows stream as they finish, so every column's width must be known before the header:
    # the kernel names of all lines (short CPU names and long transposing ones, a skipped
    # line, an error line) are found up front; each row's status starts under "status".
    path = tmp_path / "mixed.txt"
    path.write_text("convfp16 -n 1 -c 8 -H 5 -W 5 -k 8 -y 1 -x 1 -F 2 --in_layout NHWC --out_layout NHWC "
                    "--fil_layout NHWC\n"
                    "convfp16 -n 1 -c 8 -H 5 -W 5 -k 8 -y 1 -x 1 -F 1\n"
                    "conv -n 1 -c 144 -H 6 -W 6 -k 32 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -g 2 -F 2\n"
                    "convfp16 -n 1 -c 8 -H 5 -W 5 -k 8 -y 9 -x 9 -F 2\n")
    status, out, _ = run(capsys, "batch", str(path), "--backend", "cpu")
    start = next(i for i, x in enumerate(out) if x.split()[:3] == ["line", "problem_key", "applicable"])
    header, rows = out[start], out[start + 1:start + 5]
    assert len(rows) == 4 and not rows[-1].startswith("Summary")
    for name in ("applicable", "verified", "status"):
        col = header.index(name)
        for row in rows:
            assert row[col - 2:col] == "  " and row[col] != " ", (name, header, row)
