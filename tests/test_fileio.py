"""miopen_solver.fileio: user-named files are written whole or not at all, through a
symlink to its target, through devices and descriptors, and never into a FIFO, socket or
directory; reads take regular files of bounded size only. No test opens a FIFO: the type is
decided by ``os.stat`` first, so a wrong implementation would be refused, not hang."""

from __future__ import annotations

import os
import socket
import stat

import pytest

from miopen_solver import fileio
from miopen_solver.errors import FileError


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def leftovers(directory) -> list:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(fileio.TEMP_SUFFIX))


# ------------------------------------------------------------------ writes
def test_new_file_is_written_with_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        assert fileio.write_text(tmp_path / "a.txt", "hello\n") == "file"
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").read_text() == "hello\n"
    assert mode(tmp_path / "a.txt") == 0o640            # 0666 less the umask 027
    assert leftovers(tmp_path) == []


def test_existing_file_keeps_its_mode_and_is_replaced_whole(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("old old old old\n")
    os.chmod(f, 0o604)
    fileio.write_text(f, "new\n")
    assert f.read_text() == "new\n" and mode(f) == 0o604


def test_symlink_target_is_written_and_the_link_kept(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "out.txt"
    target.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(os.path.join("real", "out.txt"))
    assert fileio.write_text(link, "new\n") == "file"
    assert link.is_symlink() and os.readlink(link) == os.path.join("real", "out.txt")
    assert target.read_text() == "new\n"
    assert leftovers(tmp_path) == [] and leftovers(tmp_path / "real") == []


def test_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.txt"
    link.symlink_to(tmp_path / "new.txt")
    fileio.write_text(link, "x\n")
    assert link.is_symlink() and (tmp_path / "new.txt").read_text() == "x\n"


def test_character_device_is_written_through():
    if not os.path.exists("/dev/null"):
        pytest.skip("no /dev/null")
    assert fileio.write_text("/dev/null", "discarded\n") == "device"
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)      # still the device, not a file


def test_dev_full_reports_the_error():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with pytest.raises(FileError, match=r"cannot write \(No space left on device\)"):
        fileio.write_text("/dev/full", "x")


@pytest.mark.parametrize("form", ["/dev/fd/{fd}", "/proc/self/fd/{fd}", "/proc/{pid}/fd/{fd}"])
def test_a_path_naming_an_open_descriptor_is_written_through_it(form):
    """/dev/stdout is /proc/self/fd/1: the descriptor is written, whatever it is (here a
    pipe, which as a named FIFO would be refused)."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc")
    r, w = os.pipe()
    try:
        path = form.format(fd=w, pid=os.getpid())
        assert fileio.write_text(path, "through\n") == "descriptor"
        os.close(w)
        w = None
        assert os.read(r, 100) == b"through\n"
    finally:
        os.close(r)
        if w is not None:
            os.close(w)


def test_dev_stdout_and_dash_write_to_stdout(capfd):
    if not os.path.exists("/dev/stdout"):
        pytest.skip("no /dev/stdout")
    assert fileio.write_text("-", "dash\n") == "stdout"
    assert fileio.write_text("/dev/stdout", "devstdout\n") == "descriptor"
    assert capfd.readouterr().out == "dash\ndevstdout\n"


def test_a_closed_descriptor_is_refused():
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    with pytest.raises(FileError, match=f"names descriptor {w}, which is not open"):
        fileio.write_text(f"/dev/fd/{w}", "x")


def test_fifo_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for call in (fileio.check_writable, lambda p: fileio.write_text(p, "x")):
        with pytest.raises(FileError, match=r"is a FIFO \(named pipe\), not a regular file"):
            call(fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_socket_directory_and_block_device_are_refused(tmp_path):
    sock_path = tmp_path / "s"
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(sock_path))
        with pytest.raises(FileError, match="is a socket"):
            fileio.write_text(sock_path, "x")
    finally:
        s.close()
    with pytest.raises(FileError, match="is a directory"):
        fileio.write_text(tmp_path, "x")
    block = next((os.path.join("/dev", n) for n in sorted(os.listdir("/dev"))
                  if stat.S_ISBLK(os.stat(os.path.join("/dev", n)).st_mode)), None) if os.path.isdir("/dev") else None
    if block is not None:
        with pytest.raises(FileError, match="is a block device"):
            fileio.check_writable(block)


def test_read_only_file_is_refused_and_unchanged(tmp_path):
    """Refused also for root (no write bit), before anything is written."""
    f = tmp_path / "ro.txt"
    f.write_text("keep\n")
    os.chmod(f, 0o444)
    for call in (fileio.check_writable, lambda p: fileio.write_text(p, "x")):
        with pytest.raises(FileError, match=r"is read-only \(mode 0444\)"):
            call(f)
    assert f.read_text() == "keep\n" and leftovers(tmp_path) == []


def test_missing_or_non_directory_parent_and_empty_path(tmp_path):
    with pytest.raises(FileError, match=f"directory {tmp_path / 'no'} does not exist"):
        fileio.check_writable(tmp_path / "no" / "x.txt")
    (tmp_path / "f").write_text("")
    with pytest.raises(FileError, match=f"directory {tmp_path / 'f'} is not a directory"):
        fileio.write_text(tmp_path / "f" / "x.txt", "x")
    with pytest.raises(FileError, match="empty"):
        fileio.check_writable(" ")


def test_a_write_that_fails_midway_leaves_the_old_file(tmp_path, monkeypatch):
    """The disk fills after part of the bytes: the old file stays, no temporary is left."""
    f = tmp_path / "a.csv"
    f.write_text("a,b\n1,2\n")
    real_write = os.write
    calls = []

    def half_then_full(fd, data):
        if calls:
            raise OSError(28, "No space left on device")
        calls.append(1)
        return real_write(fd, bytes(data[:len(data) // 2]))
    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(FileError, match=r"cannot write \(No space left on device\); the file was left as it was"):
        fileio.write_text(f, "a,b\n" + "3,4\n" * 1000)
    monkeypatch.undo()
    assert calls and f.read_text() == "a,b\n1,2\n" and leftovers(tmp_path) == []


def test_a_failed_rename_leaves_no_new_file(tmp_path, monkeypatch):
    def fail(*a, **k):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(FileError, match=r"cannot write \(Input/output error\); no file was created"):
        fileio.write_text(tmp_path / "new.txt", "x")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_check_writable_leaves_nothing_behind(tmp_path):
    assert fileio.check_writable(tmp_path / "x.txt") == "file"
    assert fileio.check_writable("-") == "stdout"
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ reads
def test_reads_take_regular_files_only(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(FileError, match=r"is not a regular file \(a FIFO \(named pipe\)\)"):
        fileio.read_bytes(fifo, 100)
    if os.path.exists("/dev/zero"):
        with pytest.raises(FileError, match=r"is not a regular file \(a character device\)"):
            fileio.read_bytes("/dev/zero", 100)
    with pytest.raises(FileError, match="is a directory"):
        fileio.read_text(tmp_path, 100)
    with pytest.raises(FileError, match=r"cannot read \(No such file or directory\)"):
        fileio.read_text(tmp_path / "missing", 100)


def test_reads_are_capped_and_decoded(tmp_path):
    f = tmp_path / "t.txt"
    f.write_bytes(b"x" * 101)
    with pytest.raises(FileError, match=r"too large \(101 bytes > 100\); allowed: a regular UTF-8 text file "
                                        r"of at most 100 bytes"):
        fileio.read_text(f, 100)
    assert fileio.read_text(f, 101) == "x" * 101
    f.write_bytes(b"ok\n\xe9")
    with pytest.raises(FileError, match=r"not UTF-8 text \(byte 0xe9 at offset 3\)"):
        fileio.read_text(f, 100)


def test_a_file_growing_after_the_stat_is_still_capped(tmp_path, monkeypatch):
    f = tmp_path / "grow"
    f.write_bytes(b"y" * 50)
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: real_stat(p, *a, **k) if str(p) != str(f)
                        else os.stat_result((stat.S_IFREG | 0o644,) + tuple(real_stat(p))[1:6] + (10,)
                                            + tuple(real_stat(p))[7:]))
    with pytest.raises(FileError, match=r"too large \(more than 20 bytes\)"):
        fileio.read_bytes(f, 20)


def test_long_and_odd_paths_are_cut_and_quoted_in_messages(tmp_path):
    long = str(tmp_path / ("d" * 300))
    with pytest.raises(FileError) as e:
        fileio.read_text(long, 10)
    assert "characters)" in str(e.value) and len(str(e.value)) < 400
    with pytest.raises(FileError) as e:
        fileio.read_text("bad\nname", 10)
    assert str(e.value).startswith("'bad\\nname': ")


def test_an_output_descriptor_must_be_open_for_writing(tmp_path):
    """``/dev/fd/N`` open only for reading is refused before any work (a fresh-user trial's
    tune --csv /dev/fd/3 ran the whole sweep, then failed on the write); one open for
    writing, or both, is taken."""
    import os
    from miopen_solver.errors import FileError
    from miopen_solver.fileio import output_target
    r, w = os.pipe()
    f = tmp_path / "in.txt"
    f.write_text("x")
    ro = os.open(f, os.O_RDONLY)
    rw = os.open(f, os.O_RDWR)
    try:
        for fd in (r, ro):
            with pytest.raises(FileError, match=f"descriptor {fd}, which is open for reading only"):
                output_target(f"/dev/fd/{fd}")
        for fd in (w, rw):
            assert output_target(f"/dev/fd/{fd}") == ("descriptor", fd)
    finally:
        for fd in (r, w, ro, rw):
            os.close(fd)


def test_an_output_device_is_opened_before_any_work(monkeypatch):
    """A character device that cannot be opened for writing (``/dev/tty`` with no
    terminal: ENXIO) is refused by the check, as the write would fail after the run."""
    import errno
    import os
    from miopen_solver import fileio
    from miopen_solver.errors import FileError
    assert fileio.output_target("/dev/null") == ("device", "/dev/null")
    real = os.open

    def no_device(path, flags, *a):
        if path == "/dev/null" and flags & os.O_WRONLY:
            raise OSError(errno.ENXIO, os.strerror(errno.ENXIO))
        return real(path, flags, *a)
    monkeypatch.setattr(fileio.os, "open", no_device)
    with pytest.raises(FileError, match="not writable"):
        fileio.output_target("/dev/null")
