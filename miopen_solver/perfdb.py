"""The perf-db: (problem key, arch, solver) -> best config and its time.

Storage is one sqlite file (stdlib :mod:`sqlite3`) in **MIOpen's user perf-db schema**
(:mod:`miopen_solver.miopen_db`): the ``config`` and ``perf_db`` tables exactly as MIOpen
creates them, so MIOpen reads the records of the file's arch and we read MIOpen's. MIOpen's
file has no arch (it keeps one file per device), so a file here has one *MIOpen arch*
(:attr:`PerfDb.miopen_arch`: the first arch written, kept in ``dgrad_meta``; for a MIOpen
file that we never wrote, the arch its MIOpen name says, e.g. ``gfx942130_1.1.0.udb``).
What MIOpen's tables cannot hold lives in tables MIOpen ignores:

* ``dgrad_perf_info`` -- per ``perf_db`` row: tuned time, date, device, product version, and
  the legacy key a migrated record had (valid only while the row's solver and params match);
* ``dgrad_records`` -- records of other archs and records whose key is not one of the 24-field
  ``x`` keys MIOpen's ``config`` table holds (legacy ``-`` keys of other solvers, anything
  imported, and TF32 problems, whose key carries a 25th field ``TF32``: kept apart from the
  fp32 record of the same geometry), verbatim, in insertion order;
* ``dgrad_meta`` -- the MIOpen arch.

Keys are MIOpen's ``x``-joined problem fields (:meth:`ConvProblem.miopen_db_key`); a legacy
``-`` key (:meth:`ConvProblem.problem_key`) given to :meth:`PerfDb.get`/:meth:`PerfDb.update`
is converted (:func:`miopen_solver.miopen_db.normalize_key`), and a lookup also finds a
record stored under the legacy key itself.

**Migration.** A file in the one-table schema of earlier versions (``perf_db(problem_key,
arch, solver, params, time_ms, updated)``) is migrated when first opened, in one
transaction: every row is kept -- rows of the most frequent arch whose key converts go to
MIOpen's tables (time and date to ``dgrad_perf_info``, the old key kept beside them), all
other rows to ``dgrad_records`` as they were (also rows whose values have the wrong type).
A file that cannot be written is migrated in memory for reading. When the default location
has no file yet and the earlier default (``~/.cache/miopen-dgrad/perfdb.sqlite``) exists,
that file is copied there first (the old file is left as it was).

Location, first that is set:

1. the ``path`` argument (the CLI's ``--perfdb``);
2. the environment variable :data:`ENV_VAR` (``MIOPEN_DGRAD_PERFDB``);
3. ``<user db dir>/`` :data:`DEFAULT_NAME`, where the user db dir is MIOpen's:
   ``$MIOPEN_USER_DB_PATH``, else ``~/.config/miopen`` (data, not cache).

Concurrency: WAL journal (readers never block the writer), a busy timeout
(:data:`BUSY_TIMEOUT_S`) so a writer waits for another instead of failing, and every write
in one ``BEGIN IMMEDIATE`` transaction, so two processes tuning at once cannot corrupt the
file or interleave half-records. Lookups never create the file (nor its tables).

Errors: every way a path can be unusable (a directory, a path under a regular file, a file
that is not SQLite or holds another schema, a missing parent directory of a new file, an
SQLite or OS error) raises :class:`~miopen_solver.errors.PerfDbError` with one clear
reason. Only the built-in default location (no path given, :data:`ENV_VAR` unset) has its
parent directory created.

The library never prints: lookups and stores are logged (:mod:`logging`, logger
``miopen_solver.perfdb``) as MIOpen logs them at its Info level (``Looking for key: K``,
``Key match: K``, ``Contents found: C``, ``Storing record: K``; ``src/db.cpp``
``FindRecordUnsafe``/``StoreRecordUnsafe``, ROCm/MIOpen ``94eb03f3``).

Text form (import/export) is MIOpen's perf-db record line (``src/include/miopen/db_record.hpp``;
research miopen.md section 2)::

    KEY=SolverId:VALUES;OtherSolver:VALUES

one line per problem key, several solvers ``;``-separated; VALUES is the solver's
serialised PerformanceConfig (for us :meth:`PerfConfig.serialize`, ``,``-separated). None of
``=;:`` may occur inside a field. MIOpen keeps one text file per arch, so the arch is an
argument of import/export, not part of the line. Times are not part of MIOpen's record
and are not exported. Export keeps the order records were first stored in (lines by their
key's first record, entries of a line in insertion order), so MIOpen text in export's own
form (one line per key, no spaces around ``=:;``, no byte-order mark, ``\n`` line ends, each
(key, solver) once, no entry under an aliased id such as ``1000``) imported into an empty
perf-db and exported again is the same bytes; other text comes back in that form.
"""

from __future__ import annotations

import logging
import math
import numbers
import os
import shutil
import sqlite3
import stat
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import miopen_db
from .errors import ArgumentError, PerfDbError, short_text
from .text import shorten, text_lines

log = logging.getLogger(__name__)


def _log(fn: str, message: str) -> None:
    """An Info record attributed to MIOpen's function ``fn`` (db.cpp's names)."""
    if log.isEnabledFor(logging.INFO):
        log.handle(log.makeRecord(log.name, logging.INFO, fn, 0, message, (), None, func=fn))

ENV_VAR = "MIOPEN_DGRAD_PERFDB"
BUSY_TIMEOUT_S = 30.0
"""Seconds a writer waits for another writer's lock before sqlite raises."""
_FORBIDDEN = "=;:"

LEGACY_COLUMNS = ("problem_key", "arch", "solver", "params", "time_ms", "updated")
"""The one-table schema of earlier versions (migrated on first open)."""
COLUMNS = LEGACY_COLUMNS
DEFAULT_NAME = "miopen-dgrad_1.1.0.udb"
"""The default perf-db's file name in MIOpen's user db directory."""
ANY_ARCH = "*"
"""The arch of MIOpen-table records of a file whose arch is not known (a MIOpen file we never
wrote, not named as MIOpen names them): they answer lookups for any arch."""

_SIDE_SQL = [
    "CREATE TABLE IF NOT EXISTS dgrad_perf_info (perf_id INTEGER PRIMARY KEY, solver TEXT, params TEXT, "
    "time_ms REAL, updated REAL, device TEXT, product_version TEXT, legacy_key TEXT)",
    # no column types: rows are kept as they were (a migrated value of the wrong type stays
    # one, and is named when read, rather than converted)
    "CREATE TABLE IF NOT EXISTS dgrad_records (problem_key NOT NULL, arch NOT NULL, solver NOT NULL, "
    "params NOT NULL, time_ms, updated, device, product_version, PRIMARY KEY (problem_key, arch, solver))",
    "CREATE TABLE IF NOT EXISTS dgrad_meta (name TEXT PRIMARY KEY, value TEXT)",
]
_SIDE_TABLES = ("dgrad_meta", "dgrad_perf_info", "dgrad_records")
_MIOPEN_COLUMNS = {"config": ("id",) + miopen_db.FIELDS, "perf_db": ("id", "solver", "config", "params")}


def legacy_default_path() -> Path:
    """The default location of earlier versions (``$XDG_CACHE_HOME`` or ``~/.cache``,
    ``miopen-dgrad/perfdb.sqlite``): copied to the new default on first use."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "miopen-dgrad" / "perfdb.sqlite"


def default_path() -> Path:
    """Where the perf-db lives when no path is given (see module docstring)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return miopen_db.user_db_dir() / DEFAULT_NAME


@dataclass(frozen=True)
class PerfRecord:
    """One row: the best known config (``values``, the serialised PerfConfig) of
    ``solver`` for ``problem_key`` on ``arch``, and its kernel time in ms (None when
    unknown, e.g. imported from MIOpen's text form). ``updated`` (seconds since the epoch),
    ``device`` and ``product_version`` are provenance (not compared)."""

    problem_key: str
    arch: str
    solver: str
    values: str
    time_ms: float | None = None
    updated: float | None = field(default=None, compare=False)
    device: str | None = field(default=None, compare=False)
    product_version: str | None = field(default=None, compare=False)


_FIELD_ALLOWED = (f"a non-empty string without any of {_FORBIDDEN!r} (MIOpen's record separators), "
                  f"surrounding whitespace or control characters")
_TIME_ALLOWED = "a finite number >= 0 (milliseconds: an int or a float, not text) or None"


def _check_field(name: str, value: str) -> str:
    """``value`` if it can be a perf-db record's field ``name``.

    Raises:
        ArgumentError: naming the field, the value and what is allowed.
    """
    if not isinstance(value, str) or not value:
        raise ArgumentError(f"perf-db {name}", value, _FIELD_ALLOWED)
    bad = [c for c in _FORBIDDEN if c in value]
    if bad:
        raise ArgumentError(f"perf-db {name}", value, _FIELD_ALLOWED, f"contains {''.join(bad)!r}")
    if value != value.strip() or any(not c.isprintable() for c in value):
        raise ArgumentError(f"perf-db {name}", value, _FIELD_ALLOWED, "surrounding whitespace or a control character")
    return value


def _check_time(time_ms) -> float | None:
    """``time_ms`` as a float (None stays None).

    Raises:
        ArgumentError: a bool, text or other non-number, or a number that is negative, NaN
            or infinite.
    """
    if time_ms is None:
        return None
    if isinstance(time_ms, bool) or not isinstance(time_ms, numbers.Real):
        raise ArgumentError("perf-db time_ms", time_ms, _TIME_ALLOWED)
    if not (math.isfinite(time_ms) and time_ms >= 0):
        raise ArgumentError("perf-db time_ms", time_ms, _TIME_ALLOWED)
    return float(time_ms)


def _check_optional_text(name: str, value) -> str | None:
    """``value`` if it is None or a string (provenance fields).

    Raises:
        ArgumentError: any other type.
    """
    if value is not None and not isinstance(value, str):
        raise ArgumentError(f"perf-db {name}", value, "a string or None")
    return value


def check_arch(arch: str) -> str:
    """``arch`` if it can key perf-db records: non-empty, no ``=;:``, no surrounding
    whitespace or control characters.

    Raises:
        ArgumentError: naming the value and the rule (a ValueError).
    """
    return _check_field("arch", arch)


def parse_record_line(line: str, lineno: int = 0) -> list:
    """``KEY=Id:VALUES;Id:VALUES`` -> ``[(key, solver, values), ...]``. Whitespace around
    fields and a leading byte-order mark are dropped (they would make a key that never
    matches).

    Raises:
        ValueError: a line without ``=``, an entry without ``:``, an empty field or one
            holding a second ``=;:``, naming the line number.
        ArgumentError: ``line`` is not a string.
    """
    where = f"line {lineno}: " if lineno else ""
    if not isinstance(line, str):
        raise ArgumentError("perf-db record line", line, "a string (KEY=SolverId:VALUES)")
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
        ArgumentError: ``aliases`` not a dict, or an alias that is no solver id.
    """
    check_arch(arch)
    if not isinstance(text, str):
        raise ValueError(f"perf-db text is a {type(text).__name__}; allowed: a str of MIOpen record lines")
    if aliases is not None and not isinstance(aliases, dict):
        raise ArgumentError("perf-db aliases", aliases, "a dict of solver id -> solver id, or None")
    aliases = aliases or {}
    for old, new in aliases.items():         # a record filed under a bad id could never be read
        _check_field("solver id alias", old)
        _check_field("solver id", new)
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
    fields, time_ms, extra = list(row[:4]), row[4], tuple(row[5:8])
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
    updated, device, version = extra + (None,) * (3 - len(extra))
    return PerfRecord(*fields, time_ms, updated=updated if isinstance(updated, (int, float)) else None,
                      device=device if isinstance(device, str) else None,
                      product_version=version if isinstance(version, str) else None)


def _config_key(config_id, values) -> str:
    """The ``x``-key of a row of MIOpen's ``config`` table, whose values sqlite does not
    type-check either: the layout, data type and direction must be text (valid key
    fields), every other field an integer.

    Raises:
        ValueError: naming the row and the first value of the wrong type.
    """
    for name, value in zip(miopen_db.FIELDS, values):
        text = name in miopen_db.TEXT_FIELDS
        if type(value) is not (str if text else int):
            raise ValueError(f"config row {config_id}: {name} is {_SQL_TYPES.get(type(value), type(value).__name__)} "
                             f"{short_text(repr(value), 40)}, not {'text' if text else 'an integer'}")
        if text:
            try:
                _check_field(name, value)
            except ValueError as e:
                raise ValueError(f"config row {config_id}: {e}") from None
    return miopen_db.fields_to_key(dict(zip(miopen_db.FIELDS, values)))


_STORAGE_FAILED = ("disk I/O error", "database or disk is full")
"""sqlite's messages of SQLITE_IOERR and SQLITE_FULL: the storage failed under the file."""


def _storage_failure(e: sqlite3.Error) -> bool:
    """sqlite's errors for storage that failed under it (:data:`_STORAGE_FAILED`, and
    SQLITE_CANTOPEN, which also covers a -shm it may not create), not for the file's
    contents: a reader then reads as on read-only storage."""
    return any(m in str(e) for m in _STORAGE_FAILED + ("unable to open database file",))


class PerfDb:
    """A perf-db file. Use as a context manager, or call :meth:`close`.

    Args:
        path: the sqlite file; None for :func:`default_path`.
        make_parents: create a missing parent directory on the first write; default: only
            for the built-in location (``path`` None and :data:`ENV_VAR` unset), so a
            mistyped path is an error rather than a new directory tree.
        miopen_arch: the arch of a MIOpen file's records when the file does not say (a
            MIOpen user db we never wrote, not named as MIOpen names them).

    Raises:
        ArgumentError: a ``path`` that is not a str or os.PathLike (or None) or holds a NUL,
            a ``make_parents`` that is not a bool (or None), a ``miopen_arch`` no record could
            be filed under.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, make_parents: bool | None = None,
                 miopen_arch: str | None = None):
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise ArgumentError("perf-db path", path, "a path (str or os.PathLike) or None")
        if not isinstance(make_parents, (bool, type(None))):
            raise ArgumentError("perf-db make_parents", make_parents, "True, False or None")
        if miopen_arch is not None:
            _check_field("miopen_arch", miopen_arch)
        if path is not None and "\0" in os.fspath(path):
            raise ArgumentError("perf-db path", path, "a path without NUL characters")
        self._empty = path is not None and not str(path).strip()
        self.path = Path(path).expanduser() if path is not None else default_path()
        self._builtin = path is None and not os.environ.get(ENV_VAR)
        if make_parents is None:
            make_parents = self._builtin
        self.make_parents = make_parents
        self.warnings = []
        """Things the reads so far could not use (rows of the wrong type), as sentences."""
        self._conn = None
        self._conn_writes = False
        self._snapshot = None
        self._side = False
        self._given_arch = miopen_arch
        self.migrated = None
        """After the first open: how many records a migration from the old schema moved
        (None: no migration)."""

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
            elif any(m in msg for m in _STORAGE_FAILED):
                msg = f"its storage failed ({msg}): the file system may be full"
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

    def _refuse_read_only(self) -> None:
        """A write refuses an existing file without write permission, as every file the user
        names is refused (:func:`miopen_solver.fileio.output_target`): root's writes pass the
        permission bits, so a perf-db a user made 0444 to keep it was changed there."""
        try:
            mode = self.path.stat().st_mode
        except OSError:
            return                                  # a new file, or one _check_path refuses
        if stat.S_ISREG(mode) and not mode & 0o222:
            raise PerfDbError(self.path, f"is read-only (mode {stat.S_IMODE(mode):04o})")

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

    def _check_schema(self, conn, create: bool):
        """``(conn, present)``: the connection to use (an in-memory copy when a file of the old
        schema cannot be migrated in place) and whether the tables are there (created when
        ``create`` and the database is empty). Raises PerfDbError for another schema."""
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        if "perf_db" in tables:
            cols = tuple(r[1] for r in conn.execute("PRAGMA table_info(perf_db)"))
            if cols == LEGACY_COLUMNS:
                return self._migrate(conn), True
            have = {t: {r[1] for r in conn.execute(f"PRAGMA table_info({t})")} for t in _MIOPEN_COLUMNS if t in tables}
            missing = [f"{t}.{c}" for t, want in _MIOPEN_COLUMNS.items() for c in want if c not in have.get(t, ())]
            if missing:
                raise PerfDbError(self.path, f"wrong schema: table perf_db has columns ({', '.join(cols)}); "
                                             f"expected MIOpen's user perf-db (config and perf_db tables; missing "
                                             f"{', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}) or "
                                             f"the earlier ({', '.join(LEGACY_COLUMNS)})")
            self._side = all(t in tables for t in _SIDE_TABLES)
            if not self._side and create:
                self._in_transaction(conn, lambda: [conn.execute(q) for q in _SIDE_SQL])
                self._side = True
            return conn, True
        if tables:
            raise PerfDbError(self.path, f"wrong schema: an SQLite database without a perf_db table "
                                         f"(tables: {', '.join(tables)})")
        if create:
            self._in_transaction(conn, lambda: [conn.execute(q) for q in miopen_db.create_sql() + _SIDE_SQL])
            self._side = True
            return conn, True
        return conn, False

    @staticmethod
    def _in_transaction(conn, fn):
        conn.execute("BEGIN IMMEDIATE")     # one writer at a time; the others see the result
        try:
            out = fn()
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return out

    def _migrate(self, conn):
        """Move a file of the old one-table schema into MIOpen's (see the module docstring);
        in place, or in memory when the file cannot be written. Returns the connection."""
        try:
            self._in_transaction(conn, lambda: self._migrate_rows(conn))
            self._side = True
            log.info("Migrated %s records of %s to MIOpen's user perf-db schema", self.migrated, self.path)
            return conn
        except sqlite3.OperationalError as e:
            if "readonly" not in str(e) and "read-only" not in str(e) and "unable to open" not in str(e):
                raise
        mem = sqlite3.connect(":memory:", isolation_level=None)
        conn.backup(mem)
        conn.close()
        self._in_transaction(mem, lambda: self._migrate_rows(mem))
        self._side = True
        return mem

    def _migrate_rows(self, conn) -> None:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        if "perf_db" not in tables or tuple(r[1] for r in conn.execute("PRAGMA table_info(perf_db)")) != LEGACY_COLUMNS:
            return                                   # another process migrated it meanwhile
        conn.execute("ALTER TABLE perf_db RENAME TO dgrad_perf_db_old")
        for q in miopen_db.create_sql() + _SIDE_SQL:
            conn.execute(q)
        rows = conn.execute("SELECT problem_key, arch, solver, params, time_ms, updated FROM dgrad_perf_db_old "
                            "ORDER BY rowid").fetchall()
        good = []
        for row in rows:
            try:
                rec = _record(row[:5])
            except ValueError:
                rec = None
            key = miopen_db.normalize_key(rec.problem_key) if rec else None
            good.append((row, rec, key if key and miopen_db.key_to_fields(key) else None))
        counts = {}
        for _, rec, key in good:
            if key:
                counts[rec.arch] = counts.get(rec.arch, 0) + 1
        arch = min(counts, key=lambda a: (-counts[a], a)) if counts else None
        if arch is not None:
            conn.execute("INSERT OR REPLACE INTO dgrad_meta VALUES ('arch', ?)", (arch,))
        for row, rec, key in good:
            updated = row[5] if isinstance(row[5], (int, float)) else None
            if rec is not None and key and rec.arch == arch and \
                    self._miopen_get(conn, key, rec.solver) is None:
                self._miopen_put(conn, replace(rec, problem_key=key, updated=updated),
                                 legacy=rec.problem_key if key != rec.problem_key else None)
            else:
                conn.execute("INSERT OR REPLACE INTO dgrad_records (problem_key, arch, solver, params, time_ms, "
                             "updated) VALUES (?, ?, ?, ?, ?, ?)", row)
        conn.execute("DROP TABLE dgrad_perf_db_old")
        self.migrated = len(rows)

    def _setup(self, conn, create: bool):
        """Busy timeout, WAL journal and schema on a new connection: ``(conn, present)``
        (present False when a lookup finds no table). Two processes creating the same file
        at once can get SQLITE_BUSY from the journal-mode switch or the first schema read
        without sqlite's busy handler being called (seen in CI), so those steps are retried
        until :data:`BUSY_TIMEOUT_S`."""
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
        if write:
            self._refuse_read_only()
        if self._builtin and not self.path.exists() and legacy_default_path().is_file():
            return self._connect_legacy_default(create, write)
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
                try:
                    conn, present = self._setup(conn, create)
                except sqlite3.OperationalError as e:
                    if write or not _storage_failure(e):
                        raise
                    # a reader whose storage takes no new file (full: sqlite cannot build
                    # the -shm): as on read-only storage
                    conn.close()
                    conn = self._connect_read_only()
                    conn, present = self._setup(conn, create)
                if not present:
                    conn.close()
                    self.close()
                    return None
            except BaseException:
                conn.close()
                self.close()
                raise
        self._conn, self._conn_writes = conn, write
        return conn

    def _connect_legacy_default(self, create: bool, write: bool):
        """The built-in location has no file but the earlier default does: a write copies it
        there (then migrates it); a lookup reads it (migrated in memory)."""
        old = legacy_default_path()
        with self._guard():
            src = self._sqlite(f"{old.resolve().as_uri()}?mode=ro", uri=True)
            try:
                if create or write:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    dst = self._sqlite(str(self.path))
                    src.backup(dst)
                    dst.close()
                    log.info("Copied the perf-db of the earlier default location %s to %s", old, self.path)
                else:
                    mem = sqlite3.connect(":memory:", isolation_level=None)
                    src.backup(mem)
                    conn, present = self._setup(mem, False)
                    self._conn, self._conn_writes = (conn if present else None), False
                    return self._conn
            finally:
                src.close()
        return self._connect(create, write)

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
        self._refuse_read_only()
        parent = self.path.parent
        if parent.is_dir():
            probe = parent
        else:       # the built-in location, created on write: through no dangling link, under its
            # nearest existing ancestor (a directory: _check_path refused anything else)
            dangling = next((a for a in (parent, *parent.parents) if a.is_symlink() and not a.exists()), None)
            if dangling is not None:
                raise PerfDbError(self.path, f"cannot create the directory {parent}: {dangling} is a symbolic "
                                             f"link to {os.readlink(dangling)!r}, which does not exist")
            probe = next(a for a in parent.parents if a.exists())
        try:
            with tempfile.TemporaryFile(dir=probe):
                pass
        except OSError as e:
            why = e.strerror or e
            raise PerfDbError(self.path, f"cannot create files in {parent} ({why}); a perf-db's -wal and -shm "
                                         f"files are created there" if probe == parent else
                              f"cannot create the directory {parent} ({probe}: {why})") from None
        if not self.path.exists():
            return
        with self._guard():
            conn = self._sqlite(str(self.path))
            try:
                conn, has_table = self._setup(conn, create=False)  # another schema is refused here
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for q in ["DELETE FROM perf_db WHERE 0"] if has_table else miopen_db.create_sql():
                        conn.execute(q)         # a write the rollback undoes
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

    # ----------------------------------------------------------- the two stores
    @property
    def miopen_arch(self) -> str | None:
        """The arch of the records in MIOpen's tables (None: not known yet; nothing written)."""
        conn = self._connect(create=False)
        return self._miopen_arch(conn) if conn is not None else self._given_arch

    def _miopen_arch(self, conn) -> str | None:
        if self._side:
            row = conn.execute("SELECT value FROM dgrad_meta WHERE name = 'arch'").fetchone()
            if row is not None:
                return row[0]
        return self._given_arch or miopen_db.arch_from_filename(self.path.name)

    @staticmethod
    def _config_id(conn, fields: dict, create: bool):
        names = miopen_db.TEXT_FIELDS + miopen_db.INT_FIELDS
        if create:
            conn.execute(f"INSERT OR IGNORE INTO config ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                         [fields[n] for n in names])
        row = conn.execute(f"SELECT id FROM config WHERE {' AND '.join(f'{n} = ?' for n in names)}",
                           [fields[n] for n in names]).fetchone()
        return row[0] if row else None

    def _miopen_get(self, conn, key: str, solver: str):
        """``(perf id, params, time_ms, updated, device, product version)`` of MIOpen's record
        of ``key`` and ``solver``, or None."""
        fields = miopen_db.key_to_fields(key)
        cid = self._config_id(conn, fields, create=False) if fields else None
        if cid is None:
            return None
        info = ("i.time_ms, i.updated, i.device, i.product_version" if self._side else "NULL, NULL, NULL, NULL")
        join = (" LEFT JOIN dgrad_perf_info i ON i.perf_id = p.id AND i.solver IS p.solver AND i.params IS p.params"
                if self._side else "")
        return conn.execute(f"SELECT p.id, p.params, {info} FROM perf_db p{join} WHERE p.config = ? AND p.solver = ?",
                            (cid, solver)).fetchone()

    def _miopen_put(self, conn, rec: PerfRecord, legacy: str | None = None) -> None:
        """Store ``rec`` in MIOpen's tables as MIOpen stores a record (config row if new, then
        the perf_db row of (solver, config) replaced), its time and provenance beside it."""
        cid = self._config_id(conn, miopen_db.key_to_fields(rec.problem_key), create=True)
        conn.execute("INSERT INTO perf_db (solver, config, params) VALUES (?, ?, ?) "
                     "ON CONFLICT (solver, config) DO UPDATE SET params = excluded.params",
                     (rec.solver, cid, rec.values))
        pid = conn.execute("SELECT id FROM perf_db WHERE solver = ? AND config = ?", (rec.solver, cid)).fetchone()[0]
        conn.execute("INSERT OR REPLACE INTO dgrad_perf_info VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (pid, rec.solver, rec.values, rec.time_ms, rec.updated, rec.device, rec.product_version, legacy))

    def _side_get(self, conn, key: str, arch: str, solver: str):
        if not self._side:
            return None
        return conn.execute("SELECT problem_key, arch, solver, params, time_ms, updated, device, product_version "
                            "FROM dgrad_records WHERE problem_key = ? AND arch = ? AND solver = ?",
                            (key, arch, solver)).fetchone()

    def _in_miopen(self, conn, key: str, arch: str) -> bool:
        """Whether a record of ``key`` on ``arch`` belongs in MIOpen's tables."""
        if miopen_db.key_to_fields(key) is None:
            return False
        mine = self._miopen_arch(conn)
        return mine in (None, ANY_ARCH, arch)

    def _write(self, rows: list, replace: bool) -> int:
        """Write ``rows`` of PerfRecord in one immediate transaction; returns rows changed."""
        conn = self._connect(create=True)
        now = time.time()
        with self._guard():
            return self._in_transaction(conn, lambda: self._write_rows(conn, rows, replace, now))

    def _write_rows(self, conn, rows: list, replace_: bool, now: float) -> int:
        changed = 0
        for r in rows:
            r = replace(r, updated=now)
            if self._in_miopen(conn, r.problem_key, r.arch):
                if self._miopen_arch(conn) in (None, ANY_ARCH):
                    conn.execute("INSERT OR REPLACE INTO dgrad_meta VALUES ('arch', ?)", (r.arch,))
                old = self._miopen_get(conn, r.problem_key, r.solver)
                old_ms = old[2] if old else None
            else:
                old = self._side_get(conn, r.problem_key, r.arch, r.solver)
                old_ms = old[4] if old else None
            if not replace_ and old is not None and old_ms is not None and \
                    not (isinstance(old_ms, (int, float)) and r.time_ms is not None and r.time_ms < old_ms):
                continue
            _log("StoreRecordUnsafe", f"{'Updating' if old is not None else 'Storing'} record: {r.problem_key}")
            if self._in_miopen(conn, r.problem_key, r.arch):
                self._miopen_put(conn, r)
            else:
                conn.execute("INSERT OR REPLACE INTO dgrad_records VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                             (r.problem_key, r.arch, r.solver, r.values, r.time_ms, r.updated, r.device,
                              r.product_version))
            changed += 1
        return changed

    # ----------------------------------------------------------- queries
    def get(self, problem_key: str, arch: str, solver: str) -> PerfRecord | None:
        """The record for (problem key, arch, solver), or None (also when the file does
        not exist; a lookup never creates it). A legacy ``-`` key is looked up as MIOpen's
        ``x`` key, then as itself.

        Raises:
            ArgumentError: a key, arch or solver that is not a non-empty string or holds one
                of ``=;:`` (no record could be filed under it).
            PerfDbError: the path cannot be read as a perf-db, or the record's values have
                the wrong type (see :func:`_record`).
        """
        for name, value in (("problem key", problem_key), ("arch", arch), ("solver id", solver)):
            _check_field(name, value)
        conn = self._connect(create=False)
        if conn is None:
            return None
        key = miopen_db.normalize_key(problem_key)
        _log("FindRecordUnsafe", f"Looking for key: {key}")
        row = None
        with self._guard():
            if self._in_miopen(conn, key, arch):
                m = self._miopen_get(conn, key, solver)
                if m is not None:
                    row = (key, arch, solver, m[1], m[2], m[3], m[4], m[5])
            for k in dict.fromkeys((key, problem_key)):
                if row is None:
                    row = self._side_get(conn, k, arch, solver)
        if row is None:
            return None
        _log("FindRecordUnsafe", f"Key match: {row[0]}")
        _log("FindRecordUnsafe", f"Contents found: {row[2]}:{row[3]}")
        try:
            return _record(row)
        except ValueError as e:
            raise PerfDbError(self.path, str(e)) from None

    def _all_rows(self, conn, arch: str | None) -> list:
        """Every row in storage order: MIOpen's (by config, then perf_db insertion), then ours;
        a MIOpen row whose ``config`` values have the wrong type is its ValueError instead."""
        out = []
        mine = self._miopen_arch(conn) or ANY_ARCH
        if arch is None or mine in (arch, ANY_ARCH):
            cols = ", ".join(f"c.{n}" for n in miopen_db.FIELDS)
            info = "i.time_ms, i.updated, i.device, i.product_version" if self._side else "NULL, NULL, NULL, NULL"
            join = (" LEFT JOIN dgrad_perf_info i ON i.perf_id = p.id AND i.solver IS p.solver "
                    "AND i.params IS p.params" if self._side else "")
            for r in conn.execute(f"SELECT c.id, {cols}, p.solver, p.params, {info} FROM perf_db p JOIN config c "
                                  f"ON p.config = c.id{join} ORDER BY c.id, p.id"):
                n = len(miopen_db.FIELDS) + 1
                try:
                    out.append((_config_key(r[0], r[1:n]), mine) + tuple(r[n:]))
                except ValueError as e:
                    out.append(e)
        if self._side:
            sql = ("SELECT problem_key, arch, solver, params, time_ms, updated, device, product_version "
                   "FROM dgrad_records")
            args = ()
            if arch is not None:
                sql, args = sql + " WHERE arch = ?", (arch,)
            out.extend(conn.execute(sql + " ORDER BY rowid", args).fetchall())
        return out

    def records(self, arch: str | None = None) -> list:
        """Every record (of one arch when given), in storage order (see :meth:`export_text`).
        A row whose values have the wrong type (a table written by another tool) is left
        out and named in :attr:`warnings`.

        Raises:
            ArgumentError: an ``arch`` that is not None and no arch a record could be filed
                under (:meth:`get`'s rule).
        """
        if arch is not None:
            _check_field("arch", arch)
        conn = self._connect(create=False)
        if conn is None:
            return []
        with self._guard():
            rows = self._all_rows(conn, arch)
        out, bad = [], []
        for row in rows:
            try:
                if isinstance(row, ValueError):
                    raise row
                out.append(_record(row))
            except ValueError as e:
                bad.append(str(e))
        if bad:
            self.warnings.append(f"{self.path}: skipped {len(bad)} record(s) of the wrong type: {bad[0]}"
                                 + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""))
        return out

    def update(self, problem_key: str, arch: str, solver: str, values: str,
               time_ms: float | None = None, *, force: bool = False, device: str | None = None,
               product_version: str | None = None) -> bool:
        """Store ``values`` (a serialised config) for (problem key, arch, solver); a legacy
        ``-`` key is stored as MIOpen's ``x`` key.

        Keeps the best: an existing record is replaced only when it has no time, the new
        time is lower, or ``force`` is set. Atomic against concurrent writers.

        Returns:
            True when the record was written.

        Raises:
            ArgumentError: a key, arch, solver or values that is not a non-empty string or
                holds one of ``=;:``; a time that is not a finite number >= 0 (text, a bool,
                NaN, a negative number); a device or product version that is not a string.
            PerfDbError: the path cannot be written as a perf-db.
        """
        _check_field("problem key", problem_key)
        rec = PerfRecord(_check_field("problem key", miopen_db.normalize_key(problem_key)),
                         _check_field("arch", arch), _check_field("solver id", solver),
                         _check_field("values", values), _check_time(time_ms),
                         device=_check_optional_text("device", device),
                         product_version=_check_optional_text("product_version", product_version))
        wrote = self._write([rec], replace=force) > 0
        if wrote and problem_key != rec.problem_key:     # the record now lives under the x key alone
            self._drop_side(problem_key, rec.arch, rec.solver)
        return wrote

    def _drop_side(self, problem_key: str, arch: str, solver: str) -> None:
        """Delete our table's record filed under ``problem_key`` as written (a legacy ``-``
        spelling), so one problem does not hold two records."""
        conn = self._connect(create=False, write=True)
        if conn is None or not self._side:
            return
        with self._guard():
            self._in_transaction(conn, lambda: conn.execute(
                "DELETE FROM dgrad_records WHERE problem_key = ? AND arch = ? AND solver = ?",
                (problem_key, arch, solver)).rowcount)

    def remove(self, problem_key: str, arch: str, solver: str) -> bool:
        """Delete one record (MIOpen's or ours); True when it existed.

        Raises:
            ArgumentError: a key, arch or solver that is not a non-empty string or holds one
                of ``=;:``.
            PerfDbError: the path cannot be written as a perf-db.
        """
        for name, value in (("problem key", problem_key), ("arch", arch), ("solver id", solver)):
            _check_field(name, value)
        conn = self._connect(create=False, write=True)
        if conn is None:
            return False
        key = miopen_db.normalize_key(problem_key)

        def delete():
            n = 0
            if self._in_miopen(conn, key, arch):
                m = self._miopen_get(conn, key, solver)
                if m is not None:
                    n += conn.execute("DELETE FROM perf_db WHERE id = ?", (m[0],)).rowcount
                    if self._side:
                        conn.execute("DELETE FROM dgrad_perf_info WHERE perf_id = ?", (m[0],))
            if self._side:
                for k in dict.fromkeys((key, problem_key)):
                    n += conn.execute("DELETE FROM dgrad_records WHERE problem_key = ? AND arch = ? AND solver = ?",
                                      (k, arch, solver)).rowcount
            return n
        with self._guard():
            return self._in_transaction(conn, delete) > 0

    # ----------------------------------------------------------- MIOpen text form
    def export_text(self, arch: str) -> str:
        """Records of ``arch`` as MIOpen record lines, one per problem key, ``;``-separated,
        in the order they were stored (a line where its key was first stored); ends with a
        newline when not empty. Text in this form imported into an empty perf-db comes back as
        the same bytes (see the module docstring).

        Raises:
            ArgumentError: ``arch`` not an arch a record could be filed under (None too: MIOpen's
                text holds one device's records, and a key's solver once).
        """
        _check_field("arch", arch)
        lines = {}
        for r in self.records(arch):
            lines.setdefault(r.problem_key, []).append(f"{r.solver}:{r.values}")
        return "".join(f"{k}={';'.join(v)}\n" for k, v in lines.items())

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

    def import_db(self, other: "PerfDb", arch: str | None = None) -> int:
        """Copy every record of another perf-db file (a MIOpen user db: its records are
        ``arch``'s, or the arch its file says), times and provenance kept. Returns the number
        written."""
        recs = other.records()
        self.warnings.extend(other.warnings)
        if arch is not None:
            recs = [replace(r, arch=arch) if r.arch == ANY_ARCH else r for r in recs]
        return self.import_records(recs)


__all__ = ["ANY_ARCH", "COLUMNS", "DEFAULT_NAME", "ENV_VAR", "LEGACY_COLUMNS", "legacy_default_path", "PerfDb", "PerfDbError", "PerfRecord", "check_arch", "default_path",
           "parse_record_line", "parse_text"]
