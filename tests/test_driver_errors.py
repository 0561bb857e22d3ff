"""The driver's error contract across modes (run, tune, batch, config, applicable, replay):
a user error is exit 2 and ONE stderr line ``dgrad-driver: error: <flag/path> <value>: ...
allowed: ...`` with nothing on stdout and no traceback; an unusable perf-db that is only
read is one ``dgrad-driver: warning:`` line and the default config; a compile-only build
failure is exit 3; Ctrl-C is exit 130 with the workers gone. CPU engine throughout.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT, run_cli
from driver import batch_cmd, report, workers
from driver.batch_cmd import command_tokens
from driver.options import check_timeout
from miopen_solver import prng
from miopen_solver.command import MAX_LAUNCHES, parse
from miopen_solver.errors import CompileError, PerfDbError
from miopen_solver.perfdb import ENV_VAR as PERFDB_ENV, PerfDb
from miopen_solver.solver import DgradSolver
from miopen_solver.spec import make_spec
from miopen_solver.target import PRESETS, get_target

NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
SMALL = f"convfp16 -n 2 -c 8 -H 9 -W 7 -k 12 -y 3 -x 3 -p 1 -q 1 -u 2 -v 1 -l 1 -j 1 -g 1 -F 2 -t 1 -V 1 {NHWC}"
TINY = f"convfp16 -n 1 -c 4 -H 5 -W 5 -k 8 -y 1 -x 1 -F 2 -t 1 -i 1 {NHWC}"
KNOWN_ARCHS = ", ".join(sorted(PRESETS))
FAULTS = os.path.join(ROOT, "tests", "worker_faults.py")


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    for name in (prng.SEED_ENV, workers.CRASH_ENV, workers.PRELOAD_ENV, workers.TIMEOUT_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(PERFDB_ENV, str(tmp_path / "perfdb.sqlite"))


run = run_cli


def one_line(err, *needles, kind="error"):
    """``err`` is one ``dgrad-driver: <kind>: `` line holding every needle."""
    assert len(err) == 1, err
    assert err[0].startswith(f"dgrad-driver: {kind}: "), err[0]
    assert "Traceback" not in err[0]
    for n in needles:
        assert n in err[0], (n, err[0])
    return err[0]


def batch_file(tmp_path, *lines, name="lines.txt"):
    path = tmp_path / name
    path.write_text("".join(ln + "\n" for ln in lines))
    return str(path)


def mode_args(mode, tmp_path, line=SMALL):
    """The arguments that run ``line`` in ``mode`` on the CPU engine."""
    if mode == "run":
        return [*line.split(), "--backend", "cpu"]
    if mode == "tune":
        return ["tune", *line.split(), "--backend", "cpu", "--max-configs", "1", "--verify-top", "0"]
    if mode == "batch":
        return ["batch", batch_file(tmp_path, line), "--backend", "cpu", "--no-verify"]
    if mode in ("config", "applicable"):
        return [mode, *line.split()]
    raise ValueError(mode)


def default_kernel(line=SMALL, arch="cpu"):
    p, t = parse(line).problem, get_target(arch)
    return make_spec(p, t, DgradSolver().get_default_performance_config(p, t)).kernel_name


# ================================================================ 1, 14: unusable perf-db
def _sqlite(path, sql):
    con = sqlite3.connect(path)
    con.execute(sql)
    con.commit()
    con.close()


def bad_perfdb(kind, tmp_path) -> tuple:
    """``(path, reason fragment)`` of a perf-db path of one unusable kind."""
    if kind == "not-sqlite":
        (tmp_path / "notes.txt").write_text("hello, not a database\n")
        return str(tmp_path / "notes.txt"), "not a valid SQLite database"
    if kind == "directory":
        (tmp_path / "dir").mkdir()
        return str(tmp_path / "dir"), "is a directory"
    if kind == "under-a-file":
        (tmp_path / "file.txt").write_text("x")
        return str(tmp_path / "file.txt" / "p.sqlite"), f"is under {tmp_path / 'file.txt'}, which is not a directory"
    if kind == "wrong-columns":
        _sqlite(tmp_path / "cols.sqlite", "CREATE TABLE perf_db (a, b)")
        return str(tmp_path / "cols.sqlite"), "wrong schema: table perf_db has columns (a, b)"
    if kind == "other-tables":
        _sqlite(tmp_path / "other.sqlite", "CREATE TABLE t (x)")
        return str(tmp_path / "other.sqlite"), "wrong schema: an SQLite database without a perf_db table"
    if kind == "device":
        return os.devnull, "is not a regular file"
    raise ValueError(kind)


BAD_PERFDBS = ("not-sqlite", "directory", "under-a-file", "wrong-columns", "other-tables", "device")


def given_perfdb(monkeypatch, path, source) -> tuple:
    """``(extra args, label in messages)`` for the perf-db ``path`` given by ``--perfdb``
    (``source`` "flag") or by the environment variable ("env")."""
    if source == "flag":
        return ["--perfdb", path], f"--perfdb {path}"
    monkeypatch.setenv(PERFDB_ENV, path)
    return [], f"{PERFDB_ENV}={path}"


@pytest.mark.parametrize("kind", BAD_PERFDBS)
def test_perfdb_library_raises_one_error_type(tmp_path, kind):
    path, why = bad_perfdb(kind, tmp_path)
    for call in (lambda db: db.get("k", "cpu", "s"), lambda db: db.records(), lambda db: db.check(),
                 lambda db: db.check(write=True), lambda db: db.update("k", "cpu", "s", "v", 1.0)):
        with PerfDb(path) as db, pytest.raises(PerfDbError) as e:
            call(db)
        assert isinstance(e.value, ValueError) and e.value.path == path and why in e.value.reason
        assert str(e.value) == f"perf-db {path}: {e.value.reason}"
    assert not (tmp_path / "file.txt").is_dir()


def test_perfdb_library_missing_parent(tmp_path, monkeypatch):
    path = tmp_path / "missing" / "p.sqlite"
    with PerfDb(path) as db:
        assert db.get("k", "cpu", "s") is None            # nothing there yet: not an error for a read
        with pytest.raises(PerfDbError, match=f"directory {tmp_path / 'missing'} does not exist"):
            db.update("k", "cpu", "s", "v", 1.0)
    assert not (tmp_path / "missing").exists()
    monkeypatch.delenv(PERFDB_ENV)                           # the built-in location is created
    monkeypatch.setenv("MIOPEN_USER_DB_PATH", str(tmp_path / "udb" / "miopen"))
    with PerfDb() as db:
        assert db.update("k", "cpu", "s", "v", 1.0)
    assert (tmp_path / "udb" / "miopen" / "miopen-dgrad_1.1.0.udb").is_file()


@pytest.mark.parametrize("source", ["flag", "env"])
@pytest.mark.parametrize("kind", BAD_PERFDBS)
def test_reads_of_an_unusable_perfdb_warn_and_use_the_default(capsys, monkeypatch, tmp_path, kind, source):
    path, why = bad_perfdb(kind, tmp_path)
    extra, label = given_perfdb(monkeypatch, path, source)
    warning = (f"{label} unusable: ", why, "; using the default config")
    # a plain run (the env var used to break every one of them)
    status, out, err = run(capsys, *SMALL.replace("-V 1", "-V 0").split(), "--backend", "cpu", "--json", *extra)
    one_line(err, *warning, kind="warning")
    rec = json.loads(out[0])
    assert status == 0 and rec["config_source"] == "default" and rec["kernel_name"] == default_kernel()
    # config
    status, out, err = run(capsys, "config", *SMALL.split(), "--arch", "cpu", *extra)
    one_line(err, *warning, kind="warning")
    assert status == 0 and out[0] == f"kernel: {default_kernel()}" and "(default)" in "\n".join(out)
    # batch: one warning for the whole file
    status, out, err = run(capsys, "batch", batch_file(tmp_path, TINY, TINY), "--backend", "cpu", "--no-verify",
                           *extra)
    one_line(err, *warning, kind="warning")
    assert status == 0 and out[-1] == "Summary: 2 ok"


@pytest.mark.parametrize("source", ["flag", "env"])
@pytest.mark.parametrize("kind", BAD_PERFDBS + ("missing-parent",))
def test_tune_refuses_an_unwritable_perfdb_before_the_sweep(capsys, monkeypatch, tmp_path, no_workers, kind,
                                                            source):
    if kind == "missing-parent":
        path = str(tmp_path / "nonexistent_dir" / "p.sqlite")
        why = f"directory {tmp_path / 'nonexistent_dir'} does not exist"
    else:
        path, why = bad_perfdb(kind, tmp_path)
    extra, label = given_perfdb(monkeypatch, path, source)
    status, out, err = run(capsys, *mode_args("tune", tmp_path), *extra)
    assert status == 2 and out == []
    one_line(err, f"{label}: ", why, "allowed: ")
    assert not (tmp_path / "nonexistent_dir").exists()


def test_tune_creates_only_the_builtin_perfdb_directory(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv(PERFDB_ENV)
    monkeypatch.setenv("MIOPEN_USER_DB_PATH", str(tmp_path / "udb" / "miopen"))
    status, out, err = run(capsys, *mode_args("tune", tmp_path), "-i", "1")
    db = tmp_path / "udb" / "miopen" / "miopen-dgrad_1.1.0.udb"
    assert status == 0 and err == [] and out[-1].startswith("Perf-db: stored ") and out[-1].endswith(f" in {db}")


# ================================================================ 2: --csv
def bad_csv(kind, tmp_path) -> tuple:
    """``(path, reason fragment)`` of a --csv path that cannot be written."""
    if kind == "empty":
        return "", "--csv '': empty"
    if kind == "directory":
        return str(tmp_path), f"--csv {tmp_path}: is a directory"
    if kind == "missing-parent":
        return str(tmp_path / "nope" / "x.csv"), f"directory {tmp_path / 'nope'} does not exist"
    if kind == "parent-is-a-file":
        (tmp_path / "f.txt").write_text("x")
        return str(tmp_path / "f.txt" / "x.csv"), f"directory {tmp_path / 'f.txt'} is not a directory"
    if kind == "unwritable-dir":
        return "/proc/x.csv", "--csv /proc/x.csv: not writable"
    raise ValueError(kind)


@pytest.mark.parametrize("mode", ["tune", "batch"])
@pytest.mark.parametrize("kind", ["empty", "directory", "missing-parent", "parent-is-a-file", "unwritable-dir"])
def test_csv_path_is_checked_before_anything_runs(capsys, tmp_path, no_workers, mode, kind):
    if kind == "unwritable-dir" and not os.path.isdir("/proc"):
        pytest.skip("no /proc")
    path, why = bad_csv(kind, tmp_path)
    status, out, err = run(capsys, *mode_args(mode, tmp_path, TINY), "--csv", path)
    assert status == 2 and out == []
    one_line(err, why, "allowed: a file path in an existing, writable directory")


@pytest.mark.parametrize("mode,as_json", [("tune", False), ("tune", True), ("batch", False)])
@pytest.mark.parametrize("how", ["dev-full", "oserror"])
def test_csv_write_failure_is_one_line_after_the_results(capsys, monkeypatch, tmp_path, mode, how, as_json):
    if how == "dev-full":
        if not os.path.exists("/dev/full"):
            pytest.skip("no /dev/full")
        path, why = "/dev/full", "No space left on device"
    else:
        path, why = str(tmp_path / "x.csv"), "Input/output error"

        def fail(*a, **k):
            raise OSError(5, why)
        monkeypatch.setattr(report, "write_csv", fail)
    status, out, err = run(capsys, *mode_args(mode, tmp_path, TINY), "--csv", path, *(["--json"] if as_json else []))
    assert status == 2
    one_line(err, f"--csv {path}: cannot write ({why})")
    if as_json:
        assert json.loads(out[0])["winner"] is not None
    elif mode == "tune":
        assert any(x.startswith("Top 1 ") for x in out) and out[-1].startswith("Perf-db: stored ")
    else:
        assert out[-1] == "Summary: 1 ok"
    if mode == "tune":            # the winner was stored all the same
        with PerfDb() as db:
            assert len(db.records()) == 1


# ================================================================ 3: --timeout
BAD_TIMEOUTS = ("inf", "-inf", "nan", "0", "-1", "1e7", "abc", "")


@pytest.mark.parametrize("mode", ["run", "tune", "batch"])
@pytest.mark.parametrize("value", BAD_TIMEOUTS)
def test_timeout_must_be_finite_and_positive(capsys, tmp_path, no_workers, mode, value):
    status, out, err = run(capsys, *mode_args(mode, tmp_path), "--timeout", value)
    shown = value if value else "''"
    assert status == 2 and out == []
    one_line(err, f"--timeout {shown}: allowed: a finite number of seconds > 0 and <= 1e+06")


@pytest.mark.parametrize("mode", ["run", "tune", "batch"])
@pytest.mark.parametrize("value", [v for v in BAD_TIMEOUTS if v])
def test_timeout_environment_variable_is_checked_too(capsys, monkeypatch, tmp_path, no_workers, mode, value):
    monkeypatch.setenv(workers.TIMEOUT_ENV, value)
    status, out, err = run(capsys, *mode_args(mode, tmp_path))
    assert status == 2 and out == []
    one_line(err, f"{workers.TIMEOUT_ENV}={value}: allowed: a finite number of seconds > 0")


def test_timeout_accepted_values():
    assert check_timeout("0.5", "x") == 0.5 and check_timeout("1e6", "x") == 1e6 and check_timeout(300, "x") == 300


# ================================================================ 4: compile-only build failure
@pytest.mark.parametrize("arch", [a for a in sorted(PRESETS) if a != "cpu"])
def test_compile_only_build_failure_exits_3(capsys, monkeypatch, arch):
    from miopen_solver.kernels import offline
    monkeypatch.setattr(workers, "gpu_device_nodes", lambda: [])
    message = f"compiler failed:\ncompiler: error: invalid target ID '{arch}'"

    def reject(*a, **k):
        raise CompileError(message)
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which",
                        lambda name, *a, **k: "/mock/nvcc" if name == "nvcc" else real_which(name, *a, **k))
    monkeypatch.setattr(offline, "find_amd_clang", lambda: "/mock/clang")
    monkeypatch.setattr(offline, "compile_amd", reject)
    monkeypatch.setattr(offline, "inspect_nvidia", reject)
    status, out, err = run(capsys, *SMALL.split(), "--arch", arch)
    assert status == 3 and err == []
    assert out[1] == f"Compile-only run for {arch}: no {arch} device here, nothing is launched"
    assert out[-1] == f"Compile FAILED: compiler: error: invalid target ID '{arch}'"
    status, out, err = run(capsys, *SMALL.split(), "--arch", arch, "--json")
    rec = json.loads(out[0])
    assert status == 3 and rec["status"] == "compile_failed" and "invalid target ID" in rec["compile_only"]["error"]


def test_compile_only_with_the_real_compiler_for_gfx950(capsys, monkeypatch):
    from miopen_solver.kernels.offline import find_amd_clang
    if find_amd_clang() is None:
        pytest.skip("no clang with AMDGPU targets")
    monkeypatch.setattr(workers, "gpu_device_nodes", lambda: [])
    status, out, _ = run(capsys, *SMALL.split(), "--arch", "gfx950")
    if status == 0:
        pytest.skip("this clang compiles gfx950")
    assert status == 3 and out[-1].startswith("Compile FAILED: ")


# ================================================================ 5: Ctrl-C
def _children(pid):
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                kids.append(int(d))
    return kids


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
@pytest.mark.parametrize("mode", ["run", "tune", "batch"])
def test_ctrl_c_exits_130_and_ends_the_workers(tmp_path, mode):
    env = dict(os.environ, PYTHONPATH=ROOT, DGRAD_WORKER_PRELOAD=FAULTS, DGRAD_TEST_FAULT="hang",
               **{PERFDB_ENV: str(tmp_path / "p.sqlite")})
    proc = subprocess.Popen([sys.executable, "-m", "driver", *mode_args(mode, tmp_path)], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        kids = []
        while not kids and time.time() < deadline and proc.poll() is None:
            time.sleep(0.1)
            kids = _children(proc.pid)
        assert kids, "no worker started"
        time.sleep(0.5)                         # the worker is hanging in its job now
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    assert err.splitlines() == ["dgrad-driver: interrupted"]
    deadline = time.time() + 5
    while any(_alive(k) for k in kids) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(_alive(k) for k in kids)


@pytest.mark.parametrize("mode", ["run", "config", "applicable"])
def test_ctrl_c_anywhere_exits_130(capsys, monkeypatch, tmp_path, mode):
    def interrupt(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(DgradSolver, "is_applicable", interrupt)
    status, out, err = run(capsys, *mode_args(mode, tmp_path))
    assert status == 130 and out == []
    assert [x for x in err if x] == ["dgrad-driver: interrupted"]


# ================================================================ 6: -o and the working directory
@pytest.mark.parametrize("where", ["/proc", "/sys", "read-only", "deleted"])
def test_dump_needs_a_writable_working_directory(capsys, monkeypatch, tmp_path, no_workers, where):
    if where == "read-only":
        if os.geteuid() == 0:
            pytest.skip("root writes to a read-only directory")
        where = tmp_path / "ro"
        where.mkdir(mode=0o500)
    elif where == "deleted":
        gone = tmp_path / "gone"
        gone.mkdir()
        monkeypatch.chdir(gone)
        gone.rmdir()
    elif not os.path.isdir(where):
        pytest.skip(f"no {where}")
    if where != "deleted":
        monkeypatch.chdir(where)
    status, out, err = run(capsys, *SMALL.split(), "--backend", "cpu", "-o", "1")
    assert status == 2 and out == []
    if where == "deleted":
        one_line(err, "-o 1: the working directory is unusable", "allowed: -o 0")
    else:
        one_line(err, f"-o 1: cannot create files in {where} (", "allowed: -o 0")


@pytest.mark.parametrize("name", ["dump_wei.bin", "dump_dout.bin", "dump_bwd_din_gpu.bin", "dump_bwd_din_cpu.bin"])
@pytest.mark.parametrize("kind", ["read-only", "directory", "fifo"])
def test_dump_files_that_cannot_be_replaced_are_refused_up_front(capsys, monkeypatch, tmp_path, no_workers,
                                                               name, kind):
    """An existing ``dump_*.bin`` that ``-o 1`` cannot replace (read-only, also for root; a
    directory; a FIFO) failed in the verification worker after the run (exit 3, the dumps
    before it written); it is refused before any worker starts, every dump left as it was."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / name
    if kind == "read-only":
        path.write_bytes(b"keep")
        path.chmod(0o444)
        why = "is read-only (mode 0444)"
    elif kind == "directory":
        path.mkdir()
        why = "is a directory"
    else:
        os.mkfifo(path)
        why = "is a FIFO"
    status, out, err = run(capsys, *SMALL.split(), "--backend", "cpu", "--ref", "cpu", "-o", "1")
    assert status == 2 and out == []
    one_line(err, f"-o 1: {name}: {why}", "allowed: -o 0")
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    if kind == "read-only":
        assert path.read_bytes() == b"keep"


def test_dump_of_the_cpu_reference_is_checked_only_when_it_is_written(capsys, monkeypatch, tmp_path):
    """``dump_bwd_din_cpu.bin`` is written only by a verification on the CPU reference: with
    ``-V 0`` a directory of that name is in nobody's way."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dump_bwd_din_cpu.bin").mkdir()
    status, out, err = run(capsys, *SMALL.split(), "--backend", "cpu", "-o", "1", "-V", "0")
    assert status == 0 and err == [] and "Wrote output to file dump_bwd_din_gpu.bin" in out


# ================================================================ 7: batch FILE
@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
def test_batch_refuses_endless_files(tmp_path, kind):
    path = "/dev/zero" if kind == "dev-zero" else str(tmp_path / "fifo")
    if kind == "fifo":
        os.mkfifo(path)
    elif not os.path.exists(path):
        pytest.skip("no /dev/zero")
    r = subprocess.run([sys.executable, "-m", "driver", "batch", path, "--backend", "cpu"], env=dict(
        os.environ, PYTHONPATH=ROOT), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    one_line(r.stderr.splitlines(), f"FILE {path}: is not a regular file", "allowed: a regular UTF-8 text file")


@pytest.mark.parametrize("kind", ["directory", "too-large", "latin-1", "binary", "utf-16", "missing"])
def test_batch_file_errors_name_the_file(capsys, monkeypatch, tmp_path, no_workers, kind):
    path = tmp_path / "f.txt"
    why = {"directory": "is a directory", "too-large": "too large (", "missing": "cannot read",
           "latin-1": "not UTF-8 text (byte 0xe9", "binary": "not UTF-8 text (byte 0xff",
           "utf-16": "not UTF-8 text (byte 0xff at offset 0)"}[kind]
    if kind == "directory":
        path = tmp_path
    elif kind == "too-large":
        monkeypatch.setattr(batch_cmd, "MAX_FILE_BYTES", 100)
        path.write_text(TINY + "\n" + TINY + "\n")
    elif kind == "latin-1":
        path.write_bytes(f"# café\n{TINY}\n".encode("latin-1"))
    elif kind == "binary":
        path.write_bytes(b"\x00\xff\xfe\x01" * 8)
    elif kind == "utf-16":
        path.write_bytes(f"{TINY}\n".encode("utf-16"))
    status, out, err = run(capsys, "batch", path, "--backend", "cpu")
    assert status == 2 and out == []
    one_line(err, f"FILE {path}: {why}", "allowed: a regular UTF-8 text file of at most")


# ================================================================ 8: --arch ''
@pytest.mark.parametrize("mode", ["run", "tune", "batch", "config", "applicable"])
@pytest.mark.parametrize("arch", ["", " ", "\t"])
def test_empty_arch_is_refused_with_the_known_ones(capsys, tmp_path, no_workers, mode, arch):
    status, out, err = run(capsys, *mode_args(mode, tmp_path), "--arch", arch)
    assert status == 2 and out == []
    one_line(err, f"--arch {arch!r}: empty; allowed: {KNOWN_ARCHS}")


# ================================================================ 9: --json
@pytest.mark.parametrize("arch", ["cpu", "gfx942", "sm_90"])
def test_print_name_only_json(capsys, no_workers, arch):
    args = [*SMALL.split(), "--backend", "cpu", "--arch", arch, "--print-name-only"]
    status, text, _ = run(capsys, *args)
    status_j, out, err = run(capsys, *args, "--json")
    assert status == status_j == 0 and err == []
    assert json.loads(out[0]) == {"kernel_name": text[0]} and text[0] == default_kernel(arch=arch)


def test_tune_list_json(capsys, tmp_path, no_workers):
    args = ["tune", *SMALL.split(), "--backend", "cpu", "--list", "--max-configs", "4"]
    _, text, _ = run(capsys, *args)
    status, out, err = run(capsys, *args, "--json")
    assert status == 0 and err == [] and len(out) == 1 and json.loads(out[0]) == text and len(text) == 4


@pytest.mark.parametrize("args,needle", [
    (["conv", "-n", "2", "-F", "2", "-Q", "1"], "-Q"),
    ([*SMALL.split(), "--perf-config", "1,2"], "--perf-config '1,2'"),
    (["tune", *SMALL.split(), "--top", "0"], "--top 0"),
    (["tune", *SMALL.split(), "--csv", ""], "--csv ''"),
    (["config", "conv", "-n", "2", "-F", "1"], "-F"),
    (["applicable", *SMALL.split(), "--arch", "gfx1"], "--arch gfx1"),
])
def test_user_errors_with_json_are_still_one_stderr_line(capsys, no_workers, args, needle):
    status, out, err = run(capsys, *args, "--backend", "cpu", "--json") if args[0] not in ("config", "applicable") \
        else run(capsys, *args, "--json")
    assert status == 2 and out == []
    one_line(err, needle)


# ================================================================ 10: --max-lines counts lines that ran
def test_max_lines_counts_only_lines_that_run(capsys, tmp_path):
    path = batch_file(tmp_path,
                      TINY.replace("-F 2", "-F 1"),                         # 1 skipped
                      TINY,                                                 # 2 ok
                      "conv -n 2 -F 2 -Q 1",                                # 3 error
                      TINY.replace("-F 2", "-F 4"),                         # 4 skipped
                      TINY.replace("-n 1", "-n 2").replace("--out_layout NHWC", "--out_layout CHWN"),  # 5 not-applicable
                      TINY,                                                 # 6 ok
                      TINY)                                                 # 7 ok, past the limit
    for limit, last in ((1, 2), (2, 6), (3, 7), (9, 7)):
        status, out, _ = run(capsys, "batch", path, "--backend", "cpu", "--no-verify", "--max-lines", limit)
        rows = [int(x.split()[0]) for x in out[2:-1]]
        assert rows == list(range(1, last + 1)), (limit, out)
        assert out[-1].startswith(f"Summary: {min(limit, 3)} ok")


# ================================================================ 11: trailing comments in batch lines
@pytest.mark.parametrize("path", ["tests/data/commands.txt", "bench/suite.txt"])
def test_trailing_comments_are_not_flags(path):
    with open(os.path.join(ROOT, path)) as fh:
        lines = [ln.strip() for ln in fh if ln.strip() and not ln.startswith("#")]
    assert lines and any("#" in ln for ln in lines)
    for ln in lines:
        tokens = command_tokens(ln)
        assert tokens and not any("#" in t for t in tokens)
        assert parse(tokens, allow_any_direction=True).problem is not None


def test_batch_runs_labelled_lines(capsys, tmp_path):
    path = batch_file(tmp_path, f"{TINY}  # tiny | gpu=ok cpu=ok", f"{TINY}\t#another label", "# only a comment")
    status, out, _ = run(capsys, "batch", path, "--backend", "cpu", "--no-verify")
    assert status == 0 and out[-1] == "Summary: 2 ok"


# ================================================================ 12: replay's regenerate hint
@pytest.mark.parametrize("field", ["targets.sm_90.kernel_name", "targets.gfx942.source_sha256",
                                   "targets.gfx942.defines_sha256"])
@pytest.mark.parametrize("form", ["dir", "file", "two", "only"])
def test_replay_hint_echoes_the_paths_given(capsys, tmp_path, field, form):
    from miopen_solver import fixtures as fx
    from test_replay_cli import GOLDEN, LINES, make_dir, tampered
    node = GOLDEN["tiny_fp16"]
    for k in field.split("."):
        node = node[k]
    (tmp_path / "fx").mkdir()
    d = make_dir(tmp_path / "fx", tampered("tiny_fp16", field, node + "0" if "name" in field else "0" * 64))
    (tmp_path / "more").mkdir()
    fx.write_file(tmp_path / "more" / "u.jsonl",
                  [fx.Fixture(id="extra", source="t", command=LINES["tiny_fp16"], expect=GOLDEN["tiny_fp16"])])
    paths = {"dir": [str(d)], "file": [str(d / "t.jsonl")], "two": [str(d), str(tmp_path / "more" / "u.jsonl")],
             "only": [str(d)]}[form]
    extra = ["--only", "tiny_*"] if form == "only" else []
    status, out, _ = run(capsys, "replay", *paths, *extra)
    hint = [x for x in out if "regenerate the golden with: " in x]
    assert status == 1 and len(hint) == 1
    assert hint[0].endswith(f"with: dgrad-driver replay {' '.join(paths)}{' --only ' + repr('tiny_*') if extra else ''}"
                            f" --update-golden")
    assert "fixtures/" not in hint[0]


# ================================================================ 13: --perf-config errors and confirmation
@pytest.mark.parametrize("value,why", [
    ("0,0", "has 2 fields; expected 13"),
    ("", "expected 13"),
    ("a,64,32,2,2,32,32,0,0,0,1,-1,2", "a"),
    ("0,64,32,2,2,64,32,0,0,0,1,-1,3", "tile_m must be >= 1, got 0"),
    ("64,64,32,2,2,32,32,0,0,0,0,-1,2", "split_k"),
    ("64,64,32,2,2,32,32,0,0,0,1,-1,99999999999999999999", "stages=99999999999999999999 is out of range"),
])
@pytest.mark.parametrize("mode", ["run", "config"])
def test_perf_config_errors_name_the_option(capsys, tmp_path, no_workers, mode, value, why):
    # config too: a config that parses but is invalid for the problem is bad input (exit 2), as in a run
    status, out, err = run(capsys, *mode_args(mode, tmp_path), "--perf-config", value)
    assert status == 2 and out == []
    one_line(err, f"--perf-config {value!r}: ", why)


def test_a_given_perf_config_is_confirmed(capsys):
    p = parse(SMALL).problem
    cfg = list(DgradSolver().search(p, get_target("cpu")))[1].serialize()
    status, out, _ = run(capsys, *SMALL.replace("-V 1", "-V 0").split(), "--backend", "cpu", "--perf-config", cfg)
    assert status == 0 and out[3] == f"Using --perf-config {cfg}" and sum("--perf-config" in x for x in out) == 1
    status, out, _ = run(capsys, *SMALL.replace("-V 1", "-V 0").split(), "--backend", "cpu", "--perf-config", cfg,
                         "--json")
    assert status == 0 and len(out) == 1 and json.loads(out[0])["config_source"] == "perf-config"


# ================================================================ 15: -J 1 on the CPU engine
def test_graph_timing_note_on_the_cpu_engine(capsys):
    """The note echoes -J as the line typed it (it said '--use_hip_graph 1' for any form)."""
    base = SMALL.replace("-V 1", "-V 0").split() + ["--backend", "cpu"]
    for extra in (["-J", "1"], ["--use_hip_graph", "1"], ["-J", "01"], ["--use_hip_graph", "+1"], ["-J", "0"], []):
        status, out, _ = run(capsys, *base, *extra)
        notes = [x for x in out if "is ignored on the cpu engine" in x]
        assert status == 0 and notes == ([f"Info: '{' '.join(extra)}' is ignored on the cpu engine (no graph "
                                          f"capture); the timed launches are plain launches"]
                                         if extra[1:] != ["0"] and extra else [])
    status, out, _ = run(capsys, *SMALL.replace("-t 1", "-t 0").split(), "--backend", "cpu", "-J", "1")
    assert status == 0 and not any("is ignored on the cpu engine" in x for x in out)     # nothing timed
    status, out, _ = run(capsys, *base, "-J", "1", "--json")
    assert status == 0 and len(out) == 1 and json.loads(out[0])["timing"]["method"] != "graph"


# ================================================================ 16: -Z / -L / -G 1 -V 1
@pytest.mark.parametrize("mode", ["run", "tune"])
@pytest.mark.parametrize("flags,needle,allowed", [
    (["-Z", "1"], "-Z '1': vectorized tensors are not supported by this solver", "allowed: 0"),
    (["-Z", "2"], "-Z '2': vectorized tensors", "allowed: 0"),
    (["-Z", "1", "-L", "4"], "-Z '1': vectorized tensors", "allowed: 0"),
    (["-L", "4"], "-L '4': a vector length needs vectorized tensors", "allowed: 1"),
    (["-L", "8"], "-L '8': ", "allowed: 1"),
    (["-G", "1"], "-G '1': '--gpualloc 1' should not be used with enabled verification",
     "allowed: -G 0, or -G 1 with -V 0"),
    (["-G", "1", "-V", "1"], "-G '1': ", "allowed: -G 0"),
])
def test_unsupported_vectorization_and_gpualloc_with_verify(capsys, tmp_path, no_workers, mode, flags, needle,
                                                           allowed):
    status, out, err = run(capsys, *mode_args(mode, tmp_path, SMALL + " " + " ".join(flags)))
    assert status == 2 and out == []
    one_line(err, needle, allowed)


def test_vectorization_and_gpualloc_in_batch_and_accepted_forms(capsys, tmp_path):
    path = batch_file(tmp_path, TINY + " -Z 1", TINY + " -G 1 -V 1", TINY + " -G 1 -V 0", TINY + " -Z 0 -L 1")
    status, out, _ = run(capsys, "batch", path, "--backend", "cpu", "--no-verify")
    rows = out[2:-1]
    assert status == 1 and "error" in rows[0] and "-Z '1'" in rows[0] and "error" in rows[1] and "-G '1'" in rows[1]
    assert rows[2].split()[-1] == "ok" and rows[3].split()[-1] == "ok"


@pytest.mark.parametrize("mode", ["run", "tune", "batch", "campaign"])
@pytest.mark.parametrize("value", [v for v in BAD_TIMEOUTS if v])
def test_startup_timeout_variable_is_checked_like_the_timeout(capsys, monkeypatch, tmp_path, no_workers, mode, value):
    monkeypatch.setenv(workers.STARTUP_ENV, value)
    args = mode_args("tune" if mode == "campaign" else mode, tmp_path)
    if mode == "campaign":
        args += ["--gpus", "1"]
    for extra in ([], ["--timeout", "5"]):       # read whether or not --timeout is given
        status, out, err = run(capsys, *args, *extra)
        assert status == 2 and out == []
        one_line(err, f"{workers.STARTUP_ENV}={value}: allowed: a finite number of seconds > 0")


def test_startup_timeout_accepted_values(monkeypatch):
    monkeypatch.delenv(workers.STARTUP_ENV, raising=False)
    assert workers.startup_timeout() == workers.STARTUP_TIMEOUT_S
    monkeypatch.setenv(workers.STARTUP_ENV, "0.5")
    assert workers.startup_timeout() == 0.5 and workers.job_timeout(7.0) == 7.0


# ================================================================ counts: 32-bit ints, checked up front
# Launch counts stop at MAX_LAUNCHES (a run's work is bounded by its problem, not a count);
# the others at the C int MIOpenDriver reads them into.
COUNT_OPTIONS = [("run", "--warmup", 0, MAX_LAUNCHES), ("tune", "--warmup", 0, MAX_LAUNCHES),
                 ("campaign", "--warmup", 0, MAX_LAUNCHES), ("batch", "--warmup", 0, MAX_LAUNCHES),
                 ("batch", "--batch-size", 1, 2**31 - 1), ("batch", "--iters", 1, MAX_LAUNCHES)]


@pytest.mark.parametrize("mode,flag,low,high", COUNT_OPTIONS)
@pytest.mark.parametrize("value", ["99999999999", "2147483648", "-1", "0", str(MAX_LAUNCHES + 1)])
def test_count_options_are_refused_up_front(capsys, tmp_path, no_workers, mode, flag, low, high, value):
    if low <= int(value) <= high:
        pytest.skip("a valid count")
    args = mode_args("tune" if mode == "campaign" else mode, tmp_path)
    if mode == "campaign":
        args += ["--gpus", "1"]
    status, out, err = run(capsys, *args, flag, value)
    assert status == 2 and out == []
    one_line(err, f"{flag} {value}: allowed: an integer from {low} to {high}")


def test_timed_launches_are_bounded_like_the_warmup(capsys, no_workers):
    # -i is the line's own flag: the same bound, named as MIOpenDriver's flag
    status, out, err = run(capsys, *SMALL.split(), "-i", str(MAX_LAUNCHES + 1))
    assert status == 2 and out == []
    one_line(err, f"-i '{MAX_LAUNCHES + 1}': allowed: an integer from 1 to {MAX_LAUNCHES} (timed launches)")
    assert parse([*SMALL.split(), "-i", str(MAX_LAUNCHES)]).iters == MAX_LAUNCHES


@pytest.mark.parametrize("mode,flag,low,high", COUNT_OPTIONS)
def test_count_options_are_checked_through_the_python_entry_points_too(tmp_path, no_workers, mode, flag, low, high):
    from driver.batch_cmd import BatchOptions, batch_file as run_batch
    from driver.campaign import CampaignOptions, run_campaign
    from driver.options import UserError
    from driver.run_cmd import RunOptions, run_line
    from driver.tune_cmd import TuneOptions, tune_line
    name = flag[2:].replace("-", "_")
    calls = {"run": lambda: run_line(SMALL.split(), RunOptions(backend="cpu", **{name: 2**31})),
             "tune": lambda: tune_line(SMALL.split(), TuneOptions(backend="cpu", **{name: 2**31})),
             "campaign": lambda: run_campaign(CampaignOptions(line=SMALL.split(), backend="cpu", **{name: 2**31})),
             "batch": lambda: run_batch(str(batch_file(tmp_path, SMALL)), BatchOptions(backend="cpu", **{name: 2**31}))}
    with pytest.raises(UserError, match=f"{flag} {2**31}: allowed: an integer from {low} to {high}"):
        calls[mode]()


# ================================================================ -D/-e data that is not finite
NONFINITE_CASES = [("convfp16", "-D", "nan"), ("convbfp16", "-D", "inf"), ("conv", "-D", "-inf"),
                   ("convfp16", "-e", "-inf"), ("convbfp16", "-e", "nan"), ("conv", "-e", "inf"),
                   ("convfp16", "-D", None), ("convbfp16", "-e", None)]


@pytest.mark.parametrize("base,flag,bad", NONFINITE_CASES)
def test_nonfinite_input_data_is_named_as_the_datas(capsys, tmp_path, base, flag, bad):
    # A failed verification on NaN/Inf input reads as a wrong kernel unless the run says the
    # data holds them: one warning naming the flag, the file and the count; none for finite data.
    from miopen_solver import layouts
    line = " ".join([base] + SMALL.split()[1:])
    p = parse(line).problem
    shape = layouts.dy_shape(p) if flag == "-D" else layouts.w_shape(p)
    data = np.random.default_rng(3).uniform(-1, 1, shape).astype(np.float32)
    if bad is not None:
        data.flat[[0, 5, data.size - 1]] = float(bad)
    path = tmp_path / "data.bin"
    data.astype(layouts.storage_dtype(p.dtype)).tofile(path)
    status, out, err = run(capsys, *line.split(), "--backend", "cpu", flag, str(path))
    warns = [e for e in err if "NaN or Inf" in e]
    if bad is None:
        assert status == 0 and warns == []
    else:
        assert status == 1 and any("FAILED" in o for o in out)
        one_line(warns, f"{flag} {path} holds 3 NaN or Inf element(s) of {data.size}", kind="warning")
    status, out, err = run(capsys, *line.split(), "--backend", "cpu", flag, str(path), "-V", "0")
    assert status == 0 and not [e for e in err if "NaN or Inf" in e]
