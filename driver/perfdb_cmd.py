"""``dgrad-driver perfdb``: move perf-db records between our sqlite perf-db and MIOpen's
text form, and list them.

* ``perfdb import FILE --arch ARCH`` loads MIOpen record lines (``KEY=SolverId:VALUES;...``,
  as in MIOpen's ``<arch>.HIP.udb``/``.fdb.txt`` user perf-db files) for one arch; every
  solver's entries are kept, as MIOpen keeps them. Entries of this solver whose VALUES are
  not a perf config are still stored (MIOpen stores them too) but named in one warning;
  a run then ignores them with a note.
* ``perfdb export --arch ARCH [-o FILE]`` writes the arch's records in that form (stdout by
  default), one line per problem key.
* ``perfdb list [--arch ARCH] [--json]`` prints the records with their tuned times.

* ``perfdb name --arch ARCH --cus N [--text --suffix S]`` prints where MIOpen keeps that
  device's user perf-db (:func:`miopen_solver.miopen_db.user_perfdb_name`).

``--arch`` is an arch a run reads records under (:func:`perfdb_archs`: a preset's arch, or
``<arch>@cpu`` for a target simulated on the CPU engine; ``export``/``list`` also take an arch
the perf-db already holds); ``name`` takes an AMD preset's arch (with target features) and
``--cus`` from 1 to 2147483647. Anything else is exit 2, before anything is written.

``import`` also takes a MIOpen sqlite user perf-db (``*.udb``). The perf-db is ``--perfdb
PATH``, else ``$MIOPEN_DGRAD_PERFDB``, else ``miopen-dgrad_1.1.0.udb`` in MIOpen's user db
directory (:func:`miopen_solver.perfdb.default_path`). Exit status 0, or 2 for bad input (a missing
or malformed FILE, naming the line; an unusable perf-db or output path), one error line on
stderr.
"""

from __future__ import annotations

import os
from dataclasses import replace

import click

from miopen_solver import LEGACY_SOLVER_IDS, SOLVER_ID, SOLVER_NAME
from miopen_solver.config import PerfConfig
from miopen_solver.errors import FileError, PerfConfigError, PerfDbError
from miopen_solver.fileio import STDOUT, read_text, write_text
from miopen_solver.miopen_db import (FEATURES_RULE, SCHEMA_VERSION, SRAMECC_NAMED, is_problem_key, user_db_dir,
                                     user_perfdb_name)
from miopen_solver.perfdb import ANY_ARCH, PerfDb, check_arch, parse_text
from miopen_solver.target import PRESETS
from miopen_solver.text import CUT_LIMIT, json_text, shorten

from .options import (PERFDB_ALLOWED, Group, UserError, check_count, check_output_file, count_option, file_error,
                      json_option, perfdb_label, run_and_print, warn)

ARCH_HELP = ("The arch the records belong to, as the perf-db keys it: the device arch (sm_90, gfx942, ...), "
             "or <arch>@cpu for a target simulated on the CPU engine.")


def _perfdb_option(f):
    return click.option("--perfdb", "perfdb", default=None, metavar="PATH",
                        help="Perf-db file (default $MIOPEN_DGRAD_PERFDB, else miopen-dgrad_1.1.0.udb in MIOpen's "
                             "user db dir: $MIOPEN_USER_DB_PATH or ~/.config/miopen).")(f)


ALIASES = {str(i): SOLVER_NAME for i in (SOLVER_ID,) + LEGACY_SOLVER_IDS}
"""Solver ids accepted on import for this solver, filed under its name (MIOpen's SolverDbId):
its numeric solution id and the old 200 (records written before the id changed)."""


def perfdb_archs() -> list:
    """Every arch a perf-db record can be read under (what :attr:`driver.run_cmd.Device.perfdb_arch`
    gives): each preset's arch, and ``<arch>@cpu`` for a GPU preset simulated on the CPU engine."""
    gpus = sorted(name for name, t in PRESETS.items() if t.is_gpu)
    return sorted(PRESETS) + [f"{a}@cpu" for a in gpus]


def _check_arch(arch: str, known=None) -> None:
    """``--arch`` of import/export/list: an arch runs read records under
    (:func:`perfdb_archs`), or one of ``known`` (the archs a perf-db already holds, so what
    is there can still be listed and exported).

    Raises:
        UserError: anything else, naming ``--arch``, the value and the archs allowed.
    """
    try:
        check_arch(arch)
    except ValueError as e:
        raise UserError(f"--arch {shorten(arch)!r}: not usable as a perf-db arch ({e}); allowed: "
                        f"{', '.join(perfdb_archs())}") from None
    if arch not in perfdb_archs() and arch not in (known or ()):
        raise UserError(f"--arch {shorten(arch)!r}: unknown arch (no run reads records filed under it); "
                        f"allowed: {', '.join(perfdb_archs())}")


def _known_archs(perfdb) -> set:
    """The archs the perf-db holds records for (none when it cannot be read: the command's
    own read reports why)."""
    try:
        with PerfDb(perfdb) as db:
            return {r.arch for r in db.records()}
    except PerfDbError:
        return set()


def _warn_missing(perfdb, path) -> None:
    """After a read that found no file (a path the read refuses, e.g. one under a regular
    file, is its error alone): one warning, nothing read."""
    if not os.path.exists(path):
        warn(f"{perfdb_label(perfdb)}: no perf-db file there yet; nothing to read")


def _warn_skipped(db: PerfDb) -> None:
    """The records a read left out (:attr:`PerfDb.warnings`), one warning line each."""
    for text in db.warnings:
        warn(text)


def _db_error(path, e: PerfDbError) -> UserError:
    return UserError(f"{perfdb_label(path)}: {e.reason}; {PERFDB_ALLOWED}")


MAX_IMPORT_BYTES = 64 << 20
"""The largest FILE ``perfdb import`` reads (64 MiB; MIOpen's user perf-db files are KiBs to MiBs)."""


def _read_text(path: str) -> str:
    try:
        return read_text(path, MAX_IMPORT_BYTES, "UTF-8 text file (MIOpen perf-db records)")
    except FileError as e:
        raise file_error("FILE", e) from None


def _is_sqlite(path: str) -> bool:
    """A regular file starting with sqlite's header (anything else -- a FIFO, a device -- is
    left to the text reader's checks, never opened here)."""
    if not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _warn_unusable(located: list) -> None:
    """Warnings for imported records no run can use: ``located`` holds ``(where, record)``
    pairs (``where``: ``line N`` of a text file, or ``row`` of a database). A key that is no
    MIOpen problem key is never looked up; our solver's values that are no perf config are
    ignored by runs."""
    def first(items: list) -> str:      # three of them, and a mark when there are more
        return "; ".join(items[:3]) + (" ..." if len(items) > 3 else "")
    keys = [f"{where} {shorten(r.problem_key)!r}" for where, r in located if not is_problem_key(r.problem_key)]
    if keys:
        warn(f"{len(keys)} record(s) have keys that are not MIOpen problem keys and no problem will look them up: "
             + first(keys))
    bad = []
    for where, r in located:
        if r.solver == SOLVER_NAME:
            try:
                PerfConfig.parse(r.values)
            except PerfConfigError as e:
                bad.append(f"{where} {shorten(r.problem_key)}: {shorten(e, 2 * CUT_LIMIT)}")
    if bad:
        warn(f"{len(bad)} {SOLVER_NAME} record(s) are not perf configs and will be ignored by runs: " + first(bad))


def _import_db(path: str, arch: str, perfdb: str | None) -> tuple:
    """Import a MIOpen user perf-db (sqlite) file: its records are ``arch``'s."""
    if os.path.realpath(path) == os.path.realpath(PerfDb(perfdb).path):
        raise UserError(f"FILE {path}: is the perf-db being imported into; allowed: another file")
    try:
        with PerfDb(path, miopen_arch=arch) as src, PerfDb(perfdb) as db:
            db.check(write=True)
            every = src.records()
            recs = [r for r in every if r.arch in (arch, ANY_ARCH)]
            held = sorted({r.arch for r in every} - {arch, ANY_ARCH})
            if held and not recs:       # a perf-db of ours says whose its records are
                raise UserError(f"FILE {path}: holds records for {', '.join(held)}, none for --arch {arch}; "
                                f"allowed: --arch {' or '.join(held)}, or a perf-db with {arch}'s records")
            if held:
                warn(f"{len(every) - len(recs)} record(s) of {path} for {', '.join(held)} not imported "
                     f"(--arch {arch})")
            _warn_skipped(src)
            written = db.import_records([replace(r, arch=arch) for r in recs])
            _warn_unusable([("row", r) for r in recs])
    except PerfDbError as e:
        raise UserError(f"FILE {path}: {e.reason}; allowed: a MIOpen user perf-db (sqlite) or its text form") \
            if str(e.path) == str(path) else _db_error(perfdb, e) from None
    ours = sum(1 for r in recs if r.solver == SOLVER_NAME)
    return 0, [f"Imported {written} record(s) ({ours} for {SOLVER_NAME}) for {arch} from {path} "
               f"into {PerfDb(perfdb).path}"]


def import_records(path: str, arch: str, perfdb: str | None) -> tuple:
    """Import ``path`` (MIOpen's text form, or a MIOpen sqlite user perf-db) into the
    perf-db; ``(0, lines)``. Malformed text writes nothing.

    Raises:
        UserError: FILE unreadable or malformed (with the line number), a bad ``--arch``,
            or a perf-db that cannot be written.
    """
    _check_arch(arch)
    if _is_sqlite(path):
        return _import_db(path, arch, perfdb)
    text = _read_text(path)
    try:
        numbered = parse_text(text, arch, ALIASES)        # every line checked before any write
        ours = {rec.problem_key for _, rec in numbered if rec.solver == SOLVER_NAME}
        with PerfDb(perfdb) as db:
            db.check(write=True)
            written = db.import_records([rec for _, rec in numbered])
    except PerfDbError as e:
        raise _db_error(perfdb, e) from None
    except ValueError as e:
        raise UserError(f"FILE {path}: {e}") from None
    _warn_unusable([(f"line {n}", rec) for n, rec in numbered])
    return 0, [f"Imported {written} record(s) ({len(ours)} for {SOLVER_NAME}) for {arch} from {path} "
               f"into {PerfDb(perfdb).path}"]


def export_records(arch: str, perfdb: str | None, out: str | None) -> tuple:
    """The arch's records in MIOpen's text form, to stdout or ``out``; ``(0, lines)``.
    ``out`` is written whole or not at all (a temporary file renamed over it), and never
    the perf-db itself."""
    _check_arch(arch, _known_archs(perfdb) if os.path.exists(PerfDb(perfdb).path) else ())
    db_path = PerfDb(perfdb).path
    if out is not None:
        check_output_file("-o", out)
        target = os.path.realpath(out)
        own = {os.path.realpath(f"{db_path}{suffix}") for suffix in ("", "-wal", "-shm", "-journal")}
        if out != STDOUT and target in own:
            raise UserError(f"-o {out}: is the perf-db being exported ({db_path}); allowed: another file")
    try:
        with PerfDb(perfdb) as db:
            text = db.export_text(arch)
    except PerfDbError as e:
        raise _db_error(perfdb, e) from None
    _warn_missing(perfdb, db_path)
    _warn_skipped(db)
    if not text:                        # say whose records there are (e.g. gfx942@cpu's, simulated)
        held = sorted(set(_known_archs(perfdb)) - {arch, ANY_ARCH})
        if held:
            warn(f"{perfdb_label(perfdb)} holds no records for {arch}; it holds records for {', '.join(held)} "
                 f"(export those with --arch)")
    if out is None:
        return 0, text.splitlines()
    if not text and out != STDOUT and os.path.isfile(out) and os.path.getsize(out) > 0:
        # an --arch with no records (a typo, another device's name) would empty the file
        raise UserError(f"-o {out}: no {arch} records to export, and the file holds {os.path.getsize(out)} bytes; "
                        f"allowed: an --arch the perf-db holds records for, or another file (the file is unchanged)")
    try:
        kind = write_text(out, text)
    except FileError as e:
        raise file_error("-o", e) from None
    if kind in ("stdout", "descriptor"):      # the records are the output: no line after them
        return 0, []
    return 0, [f"Exported {len(text.splitlines())} line(s) for {arch} to {os.path.abspath(out)}"]


def list_records(arch: str | None, perfdb: str | None, as_json: bool) -> tuple:
    """Every record (of ``arch`` when given), one line each or one JSON list; ``(0, lines)``."""
    if arch is not None:
        _check_arch(arch, _known_archs(perfdb) if os.path.exists(PerfDb(perfdb).path) else ())
    try:
        with PerfDb(perfdb) as db:
            recs = db.records(arch)
    except PerfDbError as e:
        raise _db_error(perfdb, e) from None
    _warn_missing(perfdb, db.path)
    _warn_skipped(db)
    if as_json:
        return 0, [json_text([{"problem_key": r.problem_key, "arch": r.arch, "solver": r.solver,
                                "perf_config": r.values, "time_ms": r.time_ms} for r in recs])]
    return 0, [f"{r.arch} {r.problem_key} {r.solver} {r.values} "
               f"{'%.6f ms' % r.time_ms if r.time_ms is not None else '(no time)'}" for r in recs]


@click.group("perfdb", cls=Group, invoke_without_command=True)
@click.pass_context
def perfdb_group(ctx):
    """Import, export and list perf-db records (MIOpen's text form: KEY=SolverId:VALUES)."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


@perfdb_group.command("import")
@click.argument("file", metavar="FILE")
@click.option("--arch", required=True, help=ARCH_HELP)
@_perfdb_option
@click.pass_context
def import_cmd(ctx, file, arch, perfdb):
    """Load MIOpen perf-db record lines from FILE for --arch (replacing records of the same
    key, arch and solver). Nothing is written when a line is malformed."""
    run_and_print(ctx, import_records, file, arch, perfdb)


@perfdb_group.command("export")
@click.option("--arch", required=True, help=ARCH_HELP)
@click.option("-o", "out", default=None, metavar="FILE", help="Write here instead of stdout.")
@_perfdb_option
@click.pass_context
def export_cmd(ctx, arch, out, perfdb):
    """Print the --arch records as MIOpen perf-db record lines (times are not part of that form)."""
    run_and_print(ctx, export_records, arch, perfdb, out)


@perfdb_group.command("list")
@click.option("--arch", default=None, help="Only this arch (default: all).")
@json_option
@_perfdb_option
@click.pass_context
def list_cmd(ctx, arch, as_json, perfdb):
    """Print every record: arch, problem key, solver, perf config, tuned time."""
    run_and_print(ctx, list_records, arch, perfdb, as_json)


def name_records(arch: str, cus: int, text: bool, suffix: str, suffix_given: bool = False) -> tuple:
    """Where MIOpen keeps the user perf-db of a device (``$MIOPEN_USER_DB_PATH`` or
    ``~/.config/miopen``, the file named as MIOpen names it); ``(0, [path])``. A
    ``--suffix`` given without ``--text`` is refused: the sqlite db's name has none."""
    # our AMD targets, and the archs whose db name MIOpen spells its own way (_nosramecc)
    amd = sorted({name for name, t in PRESETS.items() if t.vendor == "amd"} | set(SRAMECC_NAMED))
    if arch.split(":")[0] not in amd or any(c.isspace() for c in arch):
        raise UserError(f"--arch {shorten(arch)!r}: not an AMD device arch MIOpen keeps a user perf-db for; "
                        f"allowed: {', '.join(amd)}, with target features if any (gfx90a:sramecc+:xnack-)")
    check_count("--cus", cus, 1)
    if suffix_given and not text:
        raise UserError(f"--suffix {shorten(suffix)!r}: needs --text (only MIOpen's text user db is named with "
                        f"a suffix; the sqlite one is <arch><CUs>_{SCHEMA_VERSION}.udb)")
    try:
        name = user_perfdb_name(arch, cus, text=text, suffix=suffix)
    except ValueError:                  # its features (the CU count is checked above)
        raise UserError(f"--arch {shorten(arch)!r}: {FEATURES_RULE}; allowed: e.g. gfx90a, gfx908:sramecc-, "
                        f"gfx90a:sramecc+:xnack-") from None
    if text and (not suffix or any(c in suffix for c in "/\\") or not suffix.isprintable()):
        raise UserError(f"--suffix {shorten(suffix)!r}: allowed: MIOpen's user db suffix, e.g. HIP.3_5_1_dabb6df2b9")
    return 0, [str(user_db_dir() / name)]


@perfdb_group.command("name")
@click.option("--arch", required=True, help="The device arch, with its features if any (gfx90a:sramecc+:xnack-).")
@count_option("--cus", 1, required=True, help="The device's compute-unit count.")
@click.option("--text", is_flag=True, help="The text perf-db's name (MIOpen's default build) instead of sqlite's.")
@click.option("--suffix", default="HIP.3_5_1", show_default=True,
              help="The MIOpen build's user db suffix (text form only; see an existing *.udb.txt or *.ufdb.txt).")
@click.pass_context
def name_cmd(ctx, arch, cus, text, suffix):
    """Print where MIOpen keeps the user perf-db of a device (copy an export there)."""
    given = ctx.get_parameter_source("suffix") != click.core.ParameterSource.DEFAULT
    run_and_print(ctx, name_records, arch, cus, text, suffix, given)


__all__ = ["perfdb_group", "import_records", "export_records", "list_records"]
