"""The perf-db: (problem key, arch, solver id) -> best config and its time.

Storage is one sqlite file (stdlib :mod:`sqlite3`). Location, first that is set:

1. the ``path`` argument (the CLI's ``--perfdb``);
2. the environment variable :data:`ENV_VAR` (``MIOPEN_DGRAD_PERFDB``);
3. ``$XDG_CACHE_HOME/miopen-dgrad/perfdb.sqlite``, or ``~/.cache/miopen-dgrad/perfdb.sqlite``.

Concurrency: WAL journal (readers never block the writer), a busy timeout
(:data:`BUSY_TIMEOUT_S`) so a writer waits for another instead of failing, and every write
in one ``BEGIN IMMEDIATE`` transaction, so two processes tuning at once cannot corrupt the
file or interleave half-records. Lookups never create the file (nor its table).

Errors: every way a path can be unusable (a directory, a path under a regular file, a file
that is not SQLite or holds another schema, a missing parent directory of a new file, an
SQLite or OS error) raises :class:`~miopen_solver.errors.PerfDbError` with one clear
reason. Only the built-in default location (no path given, :data:`ENV_VAR` unset) has its
parent directory created.

Text form (import/export) is MIOpen's perf-db record line (``src/include/miopen/db_record.hpp``;
research miopen.md section 2)::

    KEY=SolverId:VALUES;OtherSolver:VALUES

one line per problem key, several solvers ``;``-separated; VALUES is the solver's
serialised PerformanceConfig (for us :meth:`PerfConfig.serialize`, ``,``-separated). None of
``=;:`` may occur inside a field. MIOpen keeps one text file per arch, so the arch is an
argument of import/export, not part of the line. Times are not part of MIOpen's record
and are not exported.
"""

from __future__ import annotations

import math
import os
import shutil
import sqlite3
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .errors import PerfDbError, short_text
from .text import shorten, text_lines

ENV_VAR = "MIOPEN_DGRAD_PERFDB"
BUSY_TIMEOUT_S = 30.0
"""Seconds a writer waits for another writer's lock before sqlite raises."""
_FORBIDDEN = "=;:"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS perf_db (
    problem_key TEXT NOT NULL,
    arch        TEXT NOT NULL,
    solver      TEXT NOT NULL,
    params      TEXT NOT NULL,
    time_ms     REAL,
    updated     REAL NOT NULL,
    PRIMARY KEY (problem_key, arch, solver)
)
"""
COLUMNS = ("problem_key", "arch", "solver", "params", "time_ms", "updated")
"""The perf_db table's columns, in order."""


def default_path() -> Path:
    """Where the perf-db lives when no path is given (see module docstring)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "miopen-dgrad" / "perfdb.sqlite"


@dataclass(frozen=True)
class PerfRecord:
    """One row: the best known config (``values``, the serialised PerfConfig) of
    ``solver`` for ``problem_key`` on ``arch``, and its kernel time in ms (None when
    unknown, e.g. imported from MIOpen's text form)."""

    problem_key: str
    arch: str
    solver: str
    values: str
    time_ms: float | None = None


def _check_field(name: str, value: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"perf-db {name} must be a non-empty string, got {value!r}")
    bad = [c for c in _FORBIDDEN if c in value]
    if bad:
        raise ValueError(f"perf-db {name} {shorten(value)!r} contains {''.join(bad)!r}; "
                         f"MIOpen records forbid any of {_FORBIDDEN!r} inside a field")
    if value != value.strip() or any(not c.isprintable() for c in value):
        raise ValueError(f"perf-db {name} {shorten(value)!r} has surrounding whitespace or a control character")
    return value


def check_arch(arch: str) -> str:
    """``arch`` if it can key perf-db records: non-empty, no ``=;:``, no surrounding
    whitespace or control characters.

    Raises:
        ValueError: naming the value and the rule.
    """
    return _check_field("arch", arch)


def parse_record_line(line: str, lineno: int = 0) -> list:
    """``KEY=Id:VALUES;Id:VALUES`` -> ``[(key, solver, values), ...]``. Whitespace around
    fields and a leading byte-order mark are dropped (they would make a key that never
    matches).

    Raises:
        ValueError: a line without ``=``, an entry without ``:``, an empty field or one
            holding a second ``=;:``, naming the line number.
    """
    where = f"line {lineno}: " if lineno else ""
    key, sep, rest = line.strip().lstrip("\ufeff").partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"{where}perf-db record {shorten(line.strip())!r} is not KEY=SolverId:VALUES")
    out = []
    for entry in rest.split(";"):
        solver, sep, values = (part.strip() for part in entry.partition(":"))
        if not sep or not solver or not values:
            raise ValueError(f"{where}perf-db entry {shorten(entry)!r} is not SolverId:VALUES")
        try:
            out.append((_check_field("problem key", key), _check_field("solver id", solver),
                        _check_field("values", values)))
        except ValueError as e:
            raise ValueError(f"{where}{e}") from None
    return out


def parse_text(text: str, arch: str, aliases: dict | None = None) -> list:
    """MIOpen record lines (blank lines skipped) as ``[(line number, PerfRecord), ...]`` for
    ``arch``, without times, in file order. ``aliases`` renames solver ids (e.g. a numeric
    solution id to the solver name records are filed under).

    Raises:
        ValueError: a malformed line (naming its number) or arch.
    """
    check_arch(arch)
    aliases = aliases or {}
    out = []
    for n, line in enumerate(text_lines(text), 1):
        if not line.strip():
            continue
        for key, solver, values in parse_record_line(line, n):
            out.append((n, PerfRecord(key, arch, aliases.get(solver, solver), values, None)))
    return out


_SQL_TYPES = {type(None): "NULL", int: "an integer", float: "a real", str: "text", bytes: "a blob"}


def _record(row) -> PerfRecord:
    """A PerfRecord from a ``perf_db`` row, whose values sqlite does not type-check (a
    column takes any type): the four text columns must be valid fields (text, no
    ``=;:``), the time NULL or a finite number >= 0.

    Raises:
        ValueError: naming the row and the first value of the wrong type.
    """
    *fields, time_ms = row
    where = "record (" + ", ".join(short_text(repr(f), 40) for f in fields[:3]) + ")"
    for name, value in zip(("problem_key", "arch", "solver", "params"), fields):
        if not isinstance(value, str):
            raise ValueError(f"{where}: {name} is {_SQL_TYPES.get(type(value), type(value).__name__)}, not text")
        try:
            _check_field(name, value)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
    if time_ms is not None:
        if not isinstance(time_ms, (int, float)):
            raise ValueError(f"{where}: time_ms is {_SQL_TYPES.get(type(time_ms), type(time_ms).__name__)} "
                             f"{short_text(repr(time_ms), 40)}, not a number or NULL")
        if not (math.isfinite(time_ms) and time_ms >= 0):
            raise ValueError(f"{where}: time_ms {time_ms!r} is not a finite number >= 0")
        time_ms = float(time_ms)
    return PerfRecord(*fields, time_ms)


class PerfDb:
    """A perf-db file. Use as a context manager, or call :meth:`close`.

    Args:
        path: the sqlite file; None for :func:`default_path`.
        make_parents: create a missing parent directory on the first write; default: only
            for the built-in location (``path`` None and :data:`ENV_VAR` unset), so a
            mistyped path is an error rather than a new directory tree.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, make_parents: bool | None = None):
        self._empty = path is not None and not str(path).strip()
        self.path = Path(path).expanduser() if path is not None else default_path()
        if make_parents is None:
            make_parents = path is None and not os.environ.get(ENV_VAR)
        self.make_parents = make_parents
        self.warnings = []
        """Things the reads so far could not use (rows of the wrong type), as sentences."""
        self._conn = None
        self._conn_writes = False
        self._snapshot = None

    # ----------------------------------------------------------- connection
    @contextmanager
    def _guard(self):
        """SQLite and OS errors become :class:`PerfDbError` naming this path."""
        try:
            yield
        except sqlite3.DatabaseError as e:
            msg = str(e)
            if "not a database" in msg or "malformed" in msg:
                msg = f"not a valid SQLite database ({msg})"
            elif "readonly" in msg:
                msg = f"cannot be written ({msg})"
            raise PerfDbError(self.path, msg) from None
        except OSError as e:
            raise PerfDbError(self.path, e.strerror or str(e)) from None

    def _check_path(self, create: bool) -> None:
        """Refuse what can never be a perf-db file (see :class:`PerfDbError`); a path the OS
        refuses to look at (a name too long) is one too."""
        try:
            self._check_path_kind(create)
        except OSError as e:
            raise PerfDbError(self.path, e.strerror or str(e)) from None

    def _check_path_kind(self, create: bool) -> None:
        p = self.path
        if self._empty:
            raise PerfDbError(p, "is empty (no file named)")
        if p.is_dir():
            raise PerfDbError(p, "is a directory")
        if p.exists():
            if not p.is_file():
                raise PerfDbError(p, "is not a regular file")
            return
        anc = next((a for a in p.parents if a.exists()), None)
        if anc is not None and not anc.is_dir():
            raise PerfDbError(p, f"is under {anc}, which is not a directory")
        if create and not p.parent.is_dir() and not self.make_parents:
            raise PerfDbError(p, f"directory {p.parent} does not exist")

    def _check_schema(self, conn, create: bool) -> bool:
        """True when the perf_db table is there (created when ``create`` and the database
        is empty); raises PerfDbError for a database of another schema."""
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        if "perf_db" in tables:
            cols = tuple(r[1] for r in conn.execute("PRAGMA table_info(perf_db)"))
            if cols != COLUMNS:
                raise PerfDbError(self.path, f"wrong schema: table perf_db has columns ({', '.join(cols)}); "
                                             f"expected ({', '.join(COLUMNS)})")
            return True
        if tables:
            raise PerfDbError(self.path, f"wrong schema: an SQLite database without a perf_db table "
                                         f"(tables: {', '.join(tables)})")
        if create:
            conn.execute("BEGIN IMMEDIATE")     # one creator at a time; the others see the table
            try:
                conn.execute(_SCHEMA)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return True
        return False

    def _setup(self, conn, create: bool) -> bool:
        """Busy timeout, WAL journal and schema on a new connection; False when a lookup
        finds no table. Two processes creating the same file at once can get SQLITE_BUSY
        from the journal-mode switch or the first schema read without sqlite's busy handler
        being called (seen in CI), so those steps are retried until :data:`BUSY_TIMEOUT_S`."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
                if create:
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.execute("PRAGMA synchronous = NORMAL")
                return self._check_schema(conn, create)
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def _sqlite(self, target, uri: bool = False):
        return sqlite3.connect(target, uri=uri, timeout=BUSY_TIMEOUT_S, isolation_level=None)

    def _connect(self, create: bool, write: bool = False):
        """The connection, or None for a lookup where there is no file or no table yet.
        ``create``: make the file and table when missing (implies ``write``); ``write``: a
        connection that can write (a reader's read-only one is replaced)."""
        write = write or create
        if self._conn is not None and (self._conn_writes or not write):
            return self._conn
        self.close()
        self._check_path(create)
        if not create and not self.path.exists():
            return None
        with self._guard():
            if create and self.make_parents:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            if not write and not os.access(self.path.parent, os.W_OK):
                conn = self._connect_read_only()
            else:
                conn = self._sqlite(str(self.path))
            try:
                if not self._setup(conn, create):
                    conn.close()
                    self.close()
                    return None
            except BaseException:
                conn.close()
                self.close()
                raise
        self._conn, self._conn_writes = conn, write
        return conn

    def _connect_read_only(self):
        """A reader's connection where the directory cannot be written (read-only storage).

        A WAL database keeps its newest records in ``<file>-wal`` until a checkpoint, and
        sqlite needs ``<file>-shm`` beside it to read them. ``immutable=1`` would open the
        file alone and silently leave out every record still in the -wal, so, in order:
        ``mode=ro`` (reads the -wal where -wal and -shm exist); with no -wal (or an empty
        one) ``immutable=1``, which then misses nothing; else a copy of the file and its
        -wal in a temporary directory, where sqlite can build the -shm and read the -wal
        (removed on :meth:`close`).
        """
        uri = self.path.resolve().as_uri()
        conn = None
        try:
            conn = self._sqlite(f"{uri}?mode=ro", uri=True)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError:
            if conn is not None:
                conn.close()
        wal = Path(f"{self.path}-wal")
        if not wal.exists() or wal.stat().st_size == 0:
            return self._sqlite(f"{uri}?immutable=1", uri=True)
        self._snapshot = tempfile.TemporaryDirectory(prefix="dgrad-perfdb-")
        copy = Path(self._snapshot.name) / self.path.name
        shutil.copyfile(self.path, copy)
        shutil.copyfile(wal, f"{copy}-wal")
        return self._sqlite(str(copy))

    def check(self, write: bool = False) -> None:
        """Raise :class:`PerfDbError` now when the file cannot be read (or, with ``write``,
        written): what a later :meth:`get` or :meth:`update` would hit. Writes nothing; a
        new file is not created (its directory is probed with a temporary file).

        With ``write`` on an existing file: its directory must take new files (WAL mode
        creates ``-wal`` and ``-shm`` beside it) and a write transaction must start and
        take a write statement (rolled back): a read-only file, directory or file system
        fails here, not after a tune's sweep.
        """
        self._check_path(create=write)
        if not write:
            self._connect(create=False)
            return
        if not self.path.parent.is_dir():
            return                                  # the built-in location: created on write
        try:
            with tempfile.TemporaryFile(dir=self.path.parent):
                pass
        except OSError as e:
            raise PerfDbError(self.path, f"cannot create files in {self.path.parent} ({e.strerror or e}); "
                                         f"a perf-db's -wal and -shm files are created there") from None
        if not self.path.exists():
            return
        with self._guard():
            conn = self._sqlite(str(self.path))
            try:
                has_table = self._setup(conn, create=False)        # another schema is refused here
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.execute("DELETE FROM perf_db WHERE 0" if has_table else _SCHEMA)
                finally:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
            finally:
                conn.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._snapshot is not None:
            self._snapshot.cleanup()
            self._snapshot = None

    def __enter__(self) -> "PerfDb":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _write(self, rows: list, replace: bool) -> int:
        """Write ``rows`` of PerfRecord in one immediate transaction; returns rows changed."""
        conn = self._connect(create=True)
        now = time.time()
        with self._guard():
            return self._write_rows(conn, rows, replace, now)

    @staticmethod
    def _write_rows(conn, rows: list, replace: bool, now: float) -> int:
        changed = 0
        conn.execute("BEGIN IMMEDIATE")
        try:
            for r in rows:
                if replace:
                    cur = conn.execute(
                        "INSERT OR REPLACE INTO perf_db VALUES (?, ?, ?, ?, ?, ?)",
                        (r.problem_key, r.arch, r.solver, r.values, r.time_ms, now))
                else:
                    cur = conn.execute(
                        "INSERT INTO perf_db VALUES (?, ?, ?, ?, ?, ?) "
                        "ON CONFLICT (problem_key, arch, solver) DO UPDATE SET "
                        "params = excluded.params, time_ms = excluded.time_ms, updated = excluded.updated "
                        "WHERE perf_db.time_ms IS NULL OR excluded.time_ms < perf_db.time_ms",
                        (r.problem_key, r.arch, r.solver, r.values, r.time_ms, now))
                changed += cur.rowcount
            conn.execute("COMMIT")
        except BaseException:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise
        return changed

    # ----------------------------------------------------------- queries
    def get(self, problem_key: str, arch: str, solver: str) -> PerfRecord | None:
        """The record for (problem key, arch, solver), or None (also when the file does
        not exist; a lookup never creates it).

        Raises:
            PerfDbError: the path cannot be read as a perf-db, or the record's values have
                the wrong type (see :func:`_record`).
        """
        conn = self._connect(create=False)
        if conn is None:
            return None
        with self._guard():
            row = conn.execute("SELECT problem_key, arch, solver, params, time_ms FROM perf_db "
                               "WHERE problem_key = ? AND arch = ? AND solver = ?",
                               (problem_key, arch, solver)).fetchone()
        if row is None:
            return None
        try:
            return _record(row)
        except ValueError as e:
            raise PerfDbError(self.path, str(e)) from None

    def records(self, arch: str | None = None) -> list:
        """Every record (of one arch when given), sorted by key, arch and solver. A row whose
        values have the wrong type (a table written by another tool) is left out and named
        in :attr:`warnings`."""
        conn = self._connect(create=False)
        if conn is None:
            return []
        sql = "SELECT problem_key, arch, solver, params, time_ms FROM perf_db"
        args = ()
        if arch is not None:
            sql, args = sql + " WHERE arch = ?", (arch,)
        with self._guard():
            rows = conn.execute(sql + " ORDER BY problem_key, arch, solver", args).fetchall()
        out, bad = [], []
        for row in rows:
            try:
                out.append(_record(row))
            except ValueError as e:
                bad.append(str(e))
        if bad:
            self.warnings.append(f"{self.path}: skipped {len(bad)} record(s) of the wrong type: {bad[0]}"
                                 + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""))
        return out

    def update(self, problem_key: str, arch: str, solver: str, values: str,
               time_ms: float | None = None, *, force: bool = False) -> bool:
        """Store ``values`` (a serialised config) for (problem key, arch, solver).

        Keeps the best: an existing record is replaced only when it has no time, the new
        time is lower, or ``force`` is set. Atomic against concurrent writers.

        Returns:
            True when the record was written.

        Raises:
            ValueError: an empty field, one containing ``=;:``, or a negative time.
            PerfDbError: the path cannot be written as a perf-db.
        """
        rec = PerfRecord(_check_field("problem key", problem_key), _check_field("arch", arch),
                         _check_field("solver id", solver), _check_field("values", values),
                         None if time_ms is None else float(time_ms))
        if rec.time_ms is not None and not rec.time_ms >= 0:
            raise ValueError(f"perf-db time must be >= 0 ms, got {time_ms!r}")
        return self._write([rec], replace=force) > 0

    def remove(self, problem_key: str, arch: str, solver: str) -> bool:
        """Delete one record; True when it existed."""
        conn = self._connect(create=False, write=True)
        if conn is None:
            return False
        with self._guard():
            conn.execute("BEGIN IMMEDIATE")
            cur = conn.execute("DELETE FROM perf_db WHERE problem_key = ? AND arch = ? AND solver = ?",
                               (problem_key, arch, solver))
            conn.execute("COMMIT")
        return cur.rowcount > 0

    # ----------------------------------------------------------- MIOpen text form
    def export_text(self, arch: str) -> str:
        """Records of ``arch`` as MIOpen record lines, one per problem key, solvers in
        name order, ``;``-separated; lines sorted by key; ends with a newline when not
        empty."""
        lines = {}
        for r in self.records(arch):
            lines.setdefault(r.problem_key, []).append(f"{r.solver}:{r.values}")
        return "".join(f"{k}={';'.join(v)}\n" for k, v in sorted(lines.items()))

    def import_text(self, text: str, arch: str, aliases: dict | None = None) -> int:
        """Load MIOpen record lines for ``arch`` (:func:`parse_text`, then
        :meth:`import_records`). All lines are checked before any is written.

        Returns:
            the number of (key, solver) records written.

        Raises:
            ValueError: a malformed line or arch (nothing is written then).
        """
        return self.import_records([rec for _, rec in parse_text(text, arch, aliases)])

    def import_records(self, records) -> int:
        """Store imported records (no times): each replaces an existing record of its
        (key, arch, solver); among ``records`` the last of a pair wins. One transaction.

        Returns:
            the number of (key, arch, solver) records written.
        """
        rows = {(r.problem_key, r.arch, r.solver): r for r in records}
        return self._write(list(rows.values()), replace=True) if rows else 0


__all__ = ["COLUMNS", "ENV_VAR", "PerfDb", "PerfDbError", "PerfRecord", "check_arch", "default_path",
           "parse_record_line", "parse_text"]
