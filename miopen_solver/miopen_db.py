"""MIOpen's user perf-db: its problem fields and keys, its sqlite schema, its file names.

Facts (read in MIOpen's sources; nothing here is their code):

* **Problem fields** -- ``conv::ProblemDescription::Visit`` (rocm-libraries
  ``projects/miopen/src/include/miopen/conv/problem_description.hpp``, ``00bcc23b``): 21
  integer fields (``spatial_dim`` ... ``group_count``) and 3 text fields (``layout``,
  ``data_type``, ``direction``; a fourth, ``compute_datatype`` = ``TF32``, only for FP32
  with TF32 math). :meth:`ConvProblem.miopen_db_fields` gives them.
* **Text key** (ROCm 6.2 on) -- the values in ``VisitAll`` order (integers, then text)
  joined by ``x``: :data:`FIELDS` order, :func:`fields_to_key` / :func:`key_to_fields`; a
  TF32 problem's key ends ``xTF32`` (25 fields). The ``config`` table created here has the
  24 columns of every problem (MIOpen's ``CreateQuery`` visits a problem without TF32), so a
  TF32 key is not one of its rows: :func:`key_to_fields` answers None for it and the perf-db
  keeps such records in its own table, apart from the fp32 ones (:mod:`miopen_solver.perfdb`).
* **sqlite schema** -- ``SQLiteSerializable::CreateQuery`` and ``SQLitePerfDb``'s
  constructor (``projects/miopen/src/include/miopen/sqlite_db.hpp``, ``167975d6``;
  ``projects/miopen/src/sqlite_db.cpp``, ``02cfbaff``): a ``config`` table with ``id INTEGER
  PRIMARY KEY ASC``, the text fields as ``TEXT NOT NULL`` then the integer fields as ``INT
  NOT NULL``, and a unique index ``idx_config`` over all of them (text fields first); a
  ``perf_db`` table ``(id INTEGER PRIMARY KEY ASC, solver TEXT NOT NULL, config INTEGER NOT
  NULL, params TEXT NOT NULL)`` with a unique index ``idx_perf_db`` on ``(solver, config)``.
  MIOpen checks only that these columns exist (``CheckTableColumns``), so other tables in the
  file are left alone. A store is ``INSERT OR IGNORE`` of the config row, then ``INSERT OR
  REPLACE`` of the ``perf_db`` row; a lookup joins ``perf_db.config = config.id`` with every
  field in the WHERE clause.
* **File names** -- ``ExecutionContext::GetUserPerfDbPath`` (``execution_context.hpp``,
  ``273fe912``): ``<user db dir>/<basename>_1.1.0.udb`` for the sqlite perf-db
  (``SQLitePerfDb::MIOPEN_PERFDB_SCHEMA_VER``; builds with ``MIOPEN_USE_SQLITE_PERFDB``) and
  ``<user db dir>/<basename>.<suffix>.udb.txt`` for the text perf-db (the default build); the
  user *find*-db is ``<basename>.<suffix>.ufdb.txt`` (not a perf-db). ``<basename>`` is
  ``Handle::GetDbBasename`` (``handle.hpp``, ``07b88a37``): the target's DbId, then ``_`` and
  the CU count in decimal when it is at most 64, else the CU count in hex with no separator
  (gfx942 with 304 CUs: ``gfx942130``; gfx1201 with 32: ``gfx1201_32``). DbId
  (``target_properties.cpp``, ``9d35ab7c``) is the arch name, plus ``_nosramecc`` for
  gfx906/gfx908 without SRAM ECC, ``_sramecc`` where ECC is reported on for other archs
  that default to it (none in practice), and ``_xnack`` when XNACK is on. ``<suffix>`` is
  the build's ``MIOPEN_USER_DB_SUFFIX`` (``db_path.cpp.in``), seen in the wild as
  ``HIP.3_5_1_dabb6df2b9`` (backend, version, git hash).
* **Directory** -- ``PrepareUserDbPath`` (``db_path.cpp.in``, ``4a94b2c3``):
  ``$MIOPEN_USER_DB_PATH`` when set (``~`` expanded), else the build's default
  ``~/.config/miopen/``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

INT_FIELDS = ("spatial_dim", "in_channels", "in_h", "in_w", "in_d", "fil_h", "fil_w", "fil_d",
              "out_channels", "batchsize", "pad_h", "pad_w", "pad_d", "conv_stride_h", "conv_stride_w",
              "conv_stride_d", "dilation_h", "dilation_w", "dilation_d", "bias", "group_count")
TEXT_FIELDS = ("layout", "data_type", "direction")
FIELDS = INT_FIELDS + TEXT_FIELDS
"""The fields in MIOpen's ``VisitAll`` order: the text key's order."""

SCHEMA_VERSION = "1.1.0"
"""MIOpen's ``SQLitePerfDb::MIOPEN_PERFDB_SCHEMA_VER``, part of the sqlite user db's name."""

USER_DB_ENV = "MIOPEN_USER_DB_PATH"
DEFAULT_USER_DB_DIR = "~/.config/miopen"

_INT = re.compile(r"-?[0-9]+\Z")


def user_db_dir() -> Path:
    """MIOpen's user db directory: ``$MIOPEN_USER_DB_PATH``, else ``~/.config/miopen``. An empty
    ``$HOME`` counts as unset (the account's home directory): ``~`` would otherwise expand to
    nothing and put the perf-db in ``/.config/miopen``."""
    path = Path(os.environ.get(USER_DB_ENV) or DEFAULT_USER_DB_DIR)
    if os.environ.get("HOME") == "" and (str(path) == "~" or str(path).startswith("~/")):
        import pwd
        return Path(pwd.getpwuid(os.getuid()).pw_dir) / path.relative_to("~")
    return path.expanduser()


def fields_to_key(fields: dict) -> str:
    """The text key of a ``config`` row (a dict with every name of :data:`FIELDS`)."""
    return "x".join(str(fields[n]) for n in FIELDS)


def key_to_fields(key: str) -> dict | None:
    """The ``config`` row of an ``x``-key, or None when ``key`` is not one (24 ``x``-separated
    values, the first 21 decimal integers, the last 3 non-empty)."""
    parts = key.split("x")
    if len(parts) != len(FIELDS) or not all(_INT.match(p) for p in parts[:len(INT_FIELDS)]) \
            or not all(parts[len(INT_FIELDS):]):
        return None
    out = {n: int(v) for n, v in zip(INT_FIELDS, parts)}
    out.update(zip(TEXT_FIELDS, parts[len(INT_FIELDS):]))
    return out


_LEGACY_2D = re.compile(
    r"(?P<k>\d+)-(?P<ho>\d+)-(?P<wo>\d+)-(?P<y>\d+)x(?P<x>\d+)-(?P<c>\d+)-(?P<hi>\d+)-(?P<wi>\d+)-(?P<n>\d+)-"
    r"(?P<ph>\d+)x(?P<pw>\d+)-(?P<sh>\d+)x(?P<sw>\d+)-(?P<dh>\d+)x(?P<dw>\d+)-(?P<bias>\d+)-"
    r"(?P<lay>[A-Z]+(?:-[A-Z]+-[A-Z]+)?)-(?P<dt>[A-Z0-9]+)-(?P<dir>[A-Z])(?:_g(?P<g>\d+))?(?P<cx>_cxTF32)?\Z")
_LEGACY_3D = re.compile(
    r"(?P<k>\d+)-(?P<do>\d+)-(?P<ho>\d+)-(?P<wo>\d+)-(?P<z>\d+)x(?P<y>\d+)x(?P<x>\d+)-(?P<c>\d+)-(?P<di>\d+)-"
    r"(?P<hi>\d+)-(?P<wi>\d+)-(?P<n>\d+)-(?P<pd>\d+)x(?P<ph>\d+)x(?P<pw>\d+)-(?P<sd>\d+)x(?P<sh>\d+)x(?P<sw>\d+)-"
    r"(?P<dd>\d+)x(?P<dh>\d+)x(?P<dw>\d+)-(?P<bias>\d+)-(?P<lay>[A-Z]+(?:-[A-Z]+-[A-Z]+)?)-(?P<dt>[A-Z0-9]+)-"
    r"(?P<dir>[A-Z])(?:_g(?P<g>\d+))?(?P<cx>_cxTF32)?\Z")


def is_problem_key(key: str) -> bool:
    """Whether ``key`` has the form of a MIOpen problem key (an ``x``-key, or the
    ``-``-joined form of :meth:`~miopen_solver.problem.ConvProblem.problem_key`): only such a
    key can be looked up by a problem."""
    return isinstance(key, str) and (key_to_fields(key) is not None or _LEGACY_2D.match(key) is not None
                                     or _LEGACY_3D.match(key) is not None)


def legacy_key_to_key(key: str) -> str | None:
    """MIOpen's ``-``-joined key (``ProblemDescription::Serialize``, before ROCm 6.2; what
    :meth:`ConvProblem.problem_key` gives) as the ``x``-key, or None when it is not one or
    cannot be converted without losing a field: the ``x``-key keeps only "in"'s layout, so a
    key with three different layouts (``in-weights-out``) is not converted. A ``_cxTF32``
    suffix (TF32 math of FP32 data) becomes the ``x``-key's ``TF32`` field."""
    for rx, three in ((_LEGACY_2D, False), (_LEGACY_3D, True)):
        m = rx.match(key)
        if m is None:
            continue
        g = m.groupdict()
        lays = set(g["lay"].split("-"))
        if len(lays) != 1:
            return None
        g["lay"] = lays.pop()
        f = {"spatial_dim": 3 if three else 2, "in_channels": g["k"], "in_h": g["ho"], "in_w": g["wo"],
             "in_d": g["do"] if three else 1, "fil_h": g["y"], "fil_w": g["x"], "fil_d": g["z"] if three else 1,
             "out_channels": g["c"], "batchsize": g["n"], "pad_h": g["ph"], "pad_w": g["pw"],
             "pad_d": g["pd"] if three else 0, "conv_stride_h": g["sh"], "conv_stride_w": g["sw"],
             "conv_stride_d": g["sd"] if three else 0, "dilation_h": g["dh"], "dilation_w": g["dw"],
             "dilation_d": g["dd"] if three else 0, "bias": g["bias"], "group_count": g["g"] or 1,
             "layout": g["lay"], "data_type": g["dt"], "direction": g["dir"]}
        key = fields_to_key({n: (int(v) if n in INT_FIELDS else v) for n, v in f.items()})
        if g["cx"]:
            if g["dt"] != "FP32":
                return None
            key += "xTF32"
        return key
    return None


def normalize_key(key: str) -> str:
    """``key`` as an ``x``-key where it converts (a legacy ``-`` key), else unchanged."""
    return legacy_key_to_key(key) or key


FEATURES_RULE = "target features are sramecc+ or sramecc-, xnack+ or xnack-, each at most once"
"""What :func:`db_basename` takes after the arch, ``:``-separated."""
SRAMECC_NAMED = ("gfx906", "gfx908")
"""Archs whose db id MIOpen suffixes with ``_nosramecc`` when SRAM ECC is off
(``target_properties.cpp``)."""


def db_basename(arch: str, cus: int, *, xnack: bool = False, sramecc: bool | None = None) -> str:
    """MIOpen's ``Handle::GetDbBasename`` for a device: DbId, then ``_<cus>`` (decimal) for at
    most 64 CUs, else the CU count in lowercase hex. ``arch`` may carry target features
    (``gfx90a:sramecc+:xnack-``), read as MIOpen reads them.

    Raises:
        ValueError: a CU count below 1; a target feature other than ``sramecc+``/``sramecc-``/
            ``xnack+``/``xnack-``, or one given twice (:data:`FEATURES_RULE`).
    """
    if isinstance(cus, bool) or not isinstance(cus, int) or cus < 1:
        raise ValueError(f"CU count must be an integer >= 1, got {cus!r}")
    name, *features = arch.split(":")
    names = [f[:-1] for f in features]
    if any(f[-1:] not in ("+", "-") or f[:-1] not in ("sramecc", "xnack") for f in features) \
            or len(set(names)) != len(names):
        raise ValueError(f"{FEATURES_RULE}, got {arch!r}")
    for feat in features:
        if feat.startswith("xnack"):
            xnack = feat.endswith("+")
        else:
            sramecc = feat.endswith("+")
    db_id = name
    if name in SRAMECC_NAMED:
        if sramecc is False:
            db_id += "_nosramecc"
    if xnack:
        db_id += "_xnack"
    return db_id + (f"_{cus}" if cus <= 64 else format(cus, "x"))


def user_perfdb_name(arch: str, cus: int, *, text: bool = False, suffix: str = "HIP.3_5_1") -> str:
    """The name MIOpen gives the user perf-db of a device: ``<basename>_1.1.0.udb`` (sqlite)
    or, with ``text``, ``<basename>.<suffix>.udb.txt`` (``suffix`` is the MIOpen build's
    ``MIOPEN_USER_DB_SUFFIX``, e.g. ``HIP.3_5_1_dabb6df2b9``; it must match the MIOpen that
    is to read the file)."""
    base = db_basename(arch, cus)
    return f"{base}.{suffix}.udb.txt" if text else f"{base}_{SCHEMA_VERSION}.udb"


_BASENAME = re.compile(r"(?P<arch>gfx(?:1[0-9a-f]{3}|[6-9][0-9a-f]{2}))(?:_nosramecc|_sramecc)?(?:_xnack)?"
                       r"(?:_(?P<dec>\d+)|(?P<hex>[0-9a-f]+))(?:_\d+\.\d+\.\d+\.udb|\..*\.udb\.txt)\Z")


def arch_from_filename(name: str) -> str | None:
    """The arch a MIOpen user perf-db file name says it is for (``gfx942130_1.1.0.udb`` ->
    ``gfx942``), or None."""
    m = _BASENAME.match(os.path.basename(str(name)))
    return m.group("arch") if m else None


def create_sql() -> list:
    """MIOpen's user perf-db tables and indexes, as statements (see the module docstring)."""
    cols = ", ".join([f"`{n}` TEXT NOT NULL" for n in TEXT_FIELDS] + [f"`{n}` INT NOT NULL" for n in INT_FIELDS])
    index = ", ".join(TEXT_FIELDS + INT_FIELDS)
    return [
        f"CREATE TABLE IF NOT EXISTS `config` (`id` INTEGER PRIMARY KEY ASC, {cols})",
        f"CREATE UNIQUE INDEX IF NOT EXISTS `idx_config` ON config({index})",
        "CREATE TABLE IF NOT EXISTS `perf_db` (`id` INTEGER PRIMARY KEY ASC, `solver` TEXT NOT NULL, "
        "`config` INTEGER NOT NULL, `params` TEXT NOT NULL)",
        "CREATE UNIQUE INDEX IF NOT EXISTS `idx_perf_db` ON perf_db(solver, config)",
    ]


__all__ = ["FIELDS", "INT_FIELDS", "TEXT_FIELDS", "FEATURES_RULE", "SCHEMA_VERSION", "SRAMECC_NAMED", "USER_DB_ENV", "arch_from_filename",
           "create_sql", "db_basename", "fields_to_key", "key_to_fields", "legacy_key_to_key", "normalize_key",
           "user_db_dir", "user_perfdb_name"]
