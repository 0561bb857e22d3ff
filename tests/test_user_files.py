"""Every command that writes or reads a file the user names goes through
miopen_solver.fileio: ``perfdb export -o``, ``--csv`` (tune, batch), ``replay
--update-golden`` write whole-or-nothing, through symlinks and devices, never into a FIFO;
``perfdb import``, replay, ``batch`` and ``-D``/``-e`` read regular files only. Each
refusal is one error line naming the flag and path, exit 2, nothing written."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest
from click.testing import CliRunner

from conftest import ROOT, run_cli
from driver import workers
from driver.replay_cmd import replay_cmd
from miopen_solver import SOLVER_NAME
from miopen_solver import fixtures as fx
from miopen_solver.fileio import TEMP_SUFFIX
from miopen_solver.perfdb import ENV_VAR, PerfDb

NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
TINY = f"convfp16 -n 1 -c 4 -H 5 -W 5 -k 8 -y 1 -x 1 -F 2 -t 1 -i 1 {NHWC}"
KEY = "8-5-5-1x1-4-5-5-1-0x0-1x1-1x1-0-NHWC-NHWC-NHWC-FP16-B"
TUNED = "32,16,16,2,1,16,16,0,0,0,1,-1,2"
XKEY = "2x8x5x5x1x1x1x1x4x1x0x0x0x1x1x0x1x1x0x0x1xNHWCxFP16xB"   # KEY as MIOpen's x-key (stored so)
EXPORTED = f"{XKEY}={SOLVER_NAME}:{TUNED}\n"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "default.sqlite"))
    monkeypatch.delenv(workers.PRELOAD_ENV, raising=False)


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "db.sqlite"
    with PerfDb(path) as d:
        d.update(KEY, "cpu", SOLVER_NAME, TUNED, 1.0)
    return str(path)


run = run_cli


def one_error(err, *fragments):
    assert len(err) == 1 and err[0].startswith("dgrad-driver: error: "), err
    for f in fragments:
        assert f in err[0], err[0]


def no_temporaries(directory):
    assert [p.name for p in directory.iterdir() if p.name.endswith(TEMP_SUFFIX)] == []


# ------------------------------------------------------------------ perfdb export -o
def test_export_onto_a_symlink_writes_its_target_and_keeps_the_link(capsys, tmp_path, db):
    target = tmp_path / "records.txt"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    link = tmp_path / "link.txt"
    link.symlink_to("records.txt")
    status, out, err = run(capsys, "perfdb", "export", "--arch", "cpu", "--perfdb", db, "-o", link)
    assert status == 0 and err == [] and out == [f"Exported 1 line(s) for cpu to {link}"]
    assert link.is_symlink() and os.readlink(link) == "records.txt"
    assert target.read_text() == EXPORTED and stat.S_IMODE(target.stat().st_mode) == 0o640
    no_temporaries(tmp_path)


def test_export_to_a_character_device_writes_through(capsys, db):
    if not os.path.exists("/dev/null"):
        pytest.skip("no /dev/null")
    status, out, err = run(capsys, "perfdb", "export", "--arch", "cpu", "--perfdb", db, "-o", "/dev/null")
    assert status == 0 and err == [] and out == ["Exported 1 line(s) for cpu to /dev/null"]
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("dest", ["/dev/stdout", "-"])
def test_export_to_stdout_prints_only_the_records(tmp_path, db, dest):
    """In a process whose stdout is a pipe: /dev/stdout is written through, not replaced
    (as root the old code replaced the /dev/stdout link with a regular file)."""
    if dest == "/dev/stdout" and not os.path.exists("/dev/stdout"):
        pytest.skip("no /dev/stdout")
    before = os.lstat("/dev/stdout") if dest == "/dev/stdout" else None
    r = subprocess.run([sys.executable, "-m", "driver", "perfdb", "export", "--arch", "cpu", "--perfdb", db,
                        "-o", dest], env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stderr == "" and r.stdout == EXPORTED
    if before is not None:
        after = os.lstat("/dev/stdout")
        assert stat.S_ISLNK(after.st_mode) and after.st_ino == before.st_ino


def test_export_refuses_a_fifo_without_hanging(capsys, tmp_path, db):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    status, out, err = run(capsys, "perfdb", "export", "--arch", "cpu", "--perfdb", db, "-o", fifo)
    assert status == 2 and out == []
    one_error(err, f"-o {fifo}: is a FIFO (named pipe), not a regular file or a character device",
              "allowed: a file path in an existing, writable directory")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_export_refuses_a_read_only_file_and_leaves_it(capsys, tmp_path, db):
    dest = tmp_path / "ro.txt"
    dest.write_text("keep\n")
    os.chmod(dest, 0o444)
    status, out, err = run(capsys, "perfdb", "export", "--arch", "cpu", "--perfdb", db, "-o", dest)
    assert status == 2 and out == []
    one_error(err, f"-o {dest}: is read-only (mode 0444)")
    assert dest.read_text() == "keep\n"
    no_temporaries(tmp_path)


def test_export_refuses_a_directory(capsys, tmp_path, db):
    status, out, err = run(capsys, "perfdb", "export", "--arch", "cpu", "--perfdb", db, "-o", tmp_path)
    assert status == 2 and out == []
    one_error(err, f"-o {tmp_path}: is a directory")


def test_export_failing_midway_leaves_the_old_file(capsys, tmp_path, db, monkeypatch):
    dest = tmp_path / "out.txt"
    dest.write_text("old contents\n")

    def disk_full(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", disk_full)
    status, out, err = run(capsys, "perfdb", "export", "--arch", "cpu", "--perfdb", db, "-o", dest)
    assert status == 2 and out == []
    one_error(err, f"-o {dest}: cannot write (No space left on device); the file was left as it was")
    assert dest.read_text() == "old contents\n"
    no_temporaries(tmp_path)


# ------------------------------------------------------------------ --csv
@pytest.mark.parametrize("mode", ["tune", "batch"])
def test_csv_is_replaced_whole_or_left_as_it_was(capsys, tmp_path, monkeypatch, mode):
    """A CSV write that fails after part of the rows leaves the old CSV whole (it was
    rewritten in place before: a CSV cut mid-row)."""
    old = "line,status\n1,ok\n"
    csv_path = tmp_path / "rows.csv"
    csv_path.write_text(old)
    os.chmod(csv_path, 0o664)
    real_write = os.write
    csv_fds = set()
    real_open = os.open

    def tracking_open(path, flags, *a, **k):
        fd = real_open(path, flags, *a, **k)
        if str(path).endswith(TEMP_SUFFIX):
            csv_fds.add(fd)
        return fd

    def half_then_full(fd, data):
        if fd in csv_fds:
            real_write(fd, bytes(data[:len(data) // 2]))
            raise OSError(28, "No space left on device")
        return real_write(fd, data)
    monkeypatch.setattr(os, "open", tracking_open)
    monkeypatch.setattr(os, "write", half_then_full)
    if mode == "tune":
        args = ["tune", *TINY.split(), "--backend", "cpu", "--max-configs", "1", "--no-perfdb"]
    else:
        lines = tmp_path / "lines.txt"
        lines.write_text(TINY + "\n")
        args = ["batch", lines, "--backend", "cpu", "--no-perfdb"]
    status, out, err = run(capsys, *args, "--csv", csv_path)
    assert status == 2 and out                    # the results were printed first
    one_error(err, f"--csv {csv_path}: cannot write (No space left on device); the file was left as it was")
    assert csv_path.read_text() == old and stat.S_IMODE(csv_path.stat().st_mode) == 0o664
    no_temporaries(tmp_path)


@pytest.mark.parametrize("mode", ["tune", "batch"])
def test_csv_refuses_a_fifo_before_anything_runs(capsys, tmp_path, no_workers, mode):
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    lines = tmp_path / "lines.txt"
    lines.write_text(TINY + "\n")
    args = ["tune", *TINY.split(), "--backend", "cpu"] if mode == "tune" else ["batch", lines, "--backend", "cpu"]
    status, out, err = run(capsys, *args, "--csv", fifo)
    assert status == 2 and out == []
    one_error(err, f"--csv {fifo}: is a FIFO (named pipe)")


# ------------------------------------------------------------------ replay --update-golden
LINE = f"convfp16 -n 1 -c 8 -H 1 -W 7 -k 4 -y 1 -x 3 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 -g 1 -F 2 {NHWC}"


def test_update_golden_failing_midway_leaves_a_loadable_fixture_file(tmp_path, monkeypatch):
    path = tmp_path / "t.jsonl"
    fx.write_file(path, [fx.Fixture(id="a", source="test", command=LINE)])          # no golden yet: drifts
    before = path.read_text()

    def disk_full(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", disk_full)
    r = CliRunner().invoke(replay_cmd, [str(path), "--update-golden"])
    assert r.exit_code == 2 and r.stdout == ""
    one_error(r.stderr.splitlines(), f"{path}: cannot write (No space left on device); the file was left as it was")
    assert path.read_text() == before and len(fx.load(path)) == 1
    no_temporaries(tmp_path)


def test_update_golden_writes_through_a_symlinked_fixture_file(tmp_path):
    (tmp_path / "real").mkdir()
    real = tmp_path / "real" / "t.jsonl"
    fx.write_file(real, [fx.Fixture(id="a", source="test", command=LINE)])
    (tmp_path / "fixtures").mkdir()
    link = tmp_path / "fixtures" / "t.jsonl"
    link.symlink_to(real)
    r = CliRunner().invoke(replay_cmd, [str(tmp_path / "fixtures"), "--update-golden"])
    assert r.exit_code == 0, r.output
    assert link.is_symlink() and fx.load(real)[0].expect == fx.compute(LINE)


# ------------------------------------------------------------------ readers
def special_inputs(tmp_path) -> list:
    """``(path, reason)`` of files a reader must refuse before reading: a FIFO (would
    block), /dev/zero (endless), a directory."""
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    out = [(str(fifo), "is not a regular file (a FIFO (named pipe))"), (str(tmp_path), "is a directory")]
    if os.path.exists("/dev/zero"):
        out.append(("/dev/zero", "is not a regular file (a character device)"))
    return out


def test_perfdb_import_reads_regular_files_only(capsys, tmp_path):
    db = tmp_path / "db.sqlite"
    for path, why in special_inputs(tmp_path):
        status, out, err = run(capsys, "perfdb", "import", path, "--arch", "cpu", "--perfdb", db)
        assert status == 2 and out == []
        one_error(err, f"FILE {path}: {why}", "allowed: a regular UTF-8 text file")
    assert not db.exists()


def test_perfdb_import_caps_the_size(capsys, tmp_path, monkeypatch):
    from driver import perfdb_cmd
    monkeypatch.setattr(perfdb_cmd, "MAX_IMPORT_BYTES", 10)
    f = tmp_path / "big.txt"
    f.write_text(EXPORTED)
    status, _, err = run(capsys, "perfdb", "import", f, "--arch", "cpu", "--perfdb", tmp_path / "db.sqlite")
    assert status == 2
    one_error(err, f"FILE {f}: too large ({len(EXPORTED)} bytes > 10)")


def test_replay_reads_regular_files_only(tmp_path):
    for path, why in special_inputs(tmp_path):
        if path == str(tmp_path):
            continue                  # a directory is searched for *.jsonl (tested elsewhere)
        r = CliRunner().invoke(replay_cmd, [path])
        assert r.exit_code == 2 and r.stdout == ""
        one_error(r.stderr.splitlines(), f"{path}: {why}")
    # a FIFO named *.jsonl inside a fixtures directory is refused, not opened
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "d" / "x.jsonl")
    r = CliRunner().invoke(replay_cmd, [str(tmp_path / "d")])
    assert r.exit_code == 2
    one_error(r.stderr.splitlines(), "x.jsonl: is not a regular file (a FIFO (named pipe))")


@pytest.mark.parametrize("flag", ["-D", "-e"])
def test_input_tensors_must_be_regular_files(capsys, tmp_path, no_workers, flag):
    """``-D /etc`` passed the size check (a directory has a size) and failed later in a
    worker (exit 3); every special file is refused before a worker starts."""
    for path, why in special_inputs(tmp_path):
        status, out, err = run(capsys, *TINY.split(), "--backend", "cpu", flag, path)
        assert status == 2 and out == []
        one_error(err, f"{flag} {path}: {why}")


def bad_tensor_files(tmp_path) -> list:
    """``(path, reason)`` of ``-D``/``-e`` files no line can use: missing, a directory, a
    FIFO, and a regular file of the wrong size."""
    short = tmp_path / "short.bin"
    short.write_bytes(b"\0" * 10)
    return [(str(tmp_path / "missing.bin"), "cannot read (No such file or directory)"),
            (str(short), "10 bytes; allowed: exactly ")] + special_inputs(tmp_path)[:2]


@pytest.mark.parametrize("flag", ["-D", "-e"])
@pytest.mark.parametrize("mode", ["tune", "campaign"])
def test_tune_checks_input_tensors_before_any_worker(capsys, tmp_path, no_workers, flag, mode):
    """``tune`` (a sweep or a one-line campaign) with a missing or wrong-sized ``-D``/``-e``
    timed every config in a worker that failed on the file (exit 1, "No winner"); it is a
    user error before anything runs, as for a run."""
    extra = ["--results", tmp_path / "log.jsonl"] if mode == "campaign" else []
    for path, why in bad_tensor_files(tmp_path):
        status, out, err = run(capsys, "tune", *TINY.split(), flag, path, "--backend", "cpu", "--max-configs", "2",
                               "--perfdb", tmp_path / "db.sqlite", *extra)
        assert status == 2 and out == [], (out, err)
        one_error(err, f"{flag} {path}: {why}")
    assert not (tmp_path / "db.sqlite").exists()


@pytest.mark.parametrize("flag", ["-D", "-e"])
@pytest.mark.parametrize("mode", ["batch", "campaign"])
def test_file_lines_with_bad_input_tensors_are_errors(capsys, tmp_path, flag, mode):
    """A ``batch`` line (or a ``tune --file`` line) whose ``-D``/``-e`` file cannot be used
    is an ``error`` row (a skipped line) with the run's message, not a worker failure."""
    bad = bad_tensor_files(tmp_path)
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"{TINY} {flag} {path}\n" for path, _ in bad))
    if mode == "batch":
        status, out, err = run(capsys, "batch", lines, "--backend", "cpu")
        rows = [ln for ln in out if ln.lstrip().split(" ")[0].isdigit()]
        assert status == 1 and len(rows) == len(bad), out
        for row, (path, why) in zip(rows, bad):
            assert " error " in row and f"{flag} {path}: {why}" in row, row
        assert any(ln.startswith(f"Summary: {len(bad)} error") for ln in out), out
    else:                        # a good line first: the campaign runs it and lists the rest
        lines.write_text(f"{TINY}\n" + lines.read_text())
        status, out, err = run(capsys, "tune", "--file", lines, "--backend", "cpu", "--max-configs", "1",
                               "--verify-top", "0", "--perfdb", tmp_path / "db.sqlite")
        assert status == 1 and any(ln.startswith("Problem 1/1 (line 1)") for ln in out), (out, err)   # lines lost: exit 1
        for n, (path, why) in enumerate(bad, 2):
            assert any(ln.startswith(f"Skipped line {n}: error: {flag} {path}: {why}") for ln in out + err), (out, err)


@pytest.mark.parametrize("case", ["batch FILE", "batch perf-db", "tune perf-db", "tune perf-db -wal",
                                  "tune perf-db via a symlink", "tune the default perf-db", "campaign --file",
                                  "campaign perf-db", "campaign --results", "campaign --results is the perf-db",
                                  "campaign --results is --file"])
def test_an_output_file_is_never_a_file_the_command_keeps(capsys, tmp_path, monkeypatch, no_workers, db, case):
    """``--csv`` (and ``--results``) naming the perf-db or the input file replaced it: ``tune
    --perfdb p.db --csv p.db`` left a CSV where the tuned records were, ``batch FILE --csv
    FILE`` the rows where the lines were. Refused before anything runs, nothing touched."""
    lines = tmp_path / "lines.txt"
    lines.write_text(TINY + "\n")
    kept = {str(lines): lines.read_bytes(), db: open(db, "rb").read()}
    default = tmp_path / "default.sqlite"                    # the $MIOPEN_DGRAD_PERFDB of this module
    link = tmp_path / "link.csv"
    link.symlink_to(db)
    one = ["tune", *TINY.split(), "--backend", "cpu", "--max-configs", "1"]
    camp = ["tune", "--file", lines, "--backend", "cpu", "--max-configs", "1"]
    args, flag, path, what = {
        "batch FILE": (["batch", lines, "--backend", "cpu", "--csv", lines], "--csv", lines, "FILE, the lines being run"),
        "batch perf-db": (["batch", lines, "--backend", "cpu", "--perfdb", db, "--csv", db], "--csv", db, "the perf-db"),
        "tune perf-db": ([*one, "--perfdb", db, "--csv", db], "--csv", db, "the perf-db"),
        "tune perf-db -wal": ([*one, "--perfdb", db, "--csv", f"{db}-wal"], "--csv", f"{db}-wal", "the perf-db"),
        "tune perf-db via a symlink": ([*one, "--perfdb", db, "--csv", link], "--csv", link, "the perf-db"),
        "tune the default perf-db": ([*one, "--no-perfdb", "--csv", default], "--csv", default, "the perf-db"),
        "campaign --file": ([*camp, "--csv", lines], "--csv", lines, "--file, the lines being tuned"),
        "campaign perf-db": ([*camp, "--perfdb", db, "--csv", db], "--csv", db, "the perf-db"),
        "campaign --results": ([*camp, "--results", tmp_path / "r.jsonl", "--csv", tmp_path / "r.jsonl"], "--csv",
                               tmp_path / "r.jsonl", "the --results log"),
        "campaign --results is the perf-db": ([*camp, "--perfdb", db, "--results", db], "--results", db, "the perf-db"),
        "campaign --results is --file": ([*camp, "--results", lines], "--results", lines,
                                         "--file, the lines being tuned"),
    }[case]
    if case == "tune the default perf-db":
        make = PerfDb(default)
        make.update(KEY, "cpu", SOLVER_NAME, TUNED, 1.0)
        make.close()
        kept[str(default)] = default.read_bytes()
    status, out, err = run(capsys, *args)
    assert status == 2 and out == []
    one_error(err, f"{flag} {path}: is {what} (", "); allowed: another file")
    for p, data in kept.items():
        assert open(p, "rb").read() == data, p
    assert link.is_symlink() and not (tmp_path / "r.jsonl").exists()
