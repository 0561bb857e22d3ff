"""The perf-db in MIOpen's user perf-db formats, both ways (issue 17, item A).

The SQL here is written from MIOpen's schema (``sqlite_db.hpp`` ``CreateQuery``,
``sqlite_db.cpp`` ``SQLitePerfDb``; rocm-libraries ``167975d6``/``02cfbaff``), not from our
code: a ``config`` table of the problem fields and a ``perf_db`` table ``(id, solver, config,
params)`` joined on ``perf_db.config = config.id``.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from conftest import run_cli
from miopen_solver import SOLVER_NAME
from miopen_solver.miopen_db import arch_from_filename, db_basename, user_perfdb_name
from miopen_solver.perfdb import ENV_VAR, PerfDb, legacy_default_path

NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
LINE = f"convfp16 -n 1 -c 8 -H 5 -W 5 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2 -t 1 -i 1 -V 0 {NHWC}"
LEGACY_KEY = "8-5-5-3x3-8-5-5-1-1x1-1x1-1x1-0-NHWC-NHWC-NHWC-FP16-B"
# LINE's problem as MIOpen's config row, by hand: direction B, so "in" is dY (K=8, Ho=Wo=5);
# a 2-D problem has depth 1 for tensors and 0 for pad/stride/dilation
FIELDS = dict(layout="NHWC", data_type="FP16", direction="B", spatial_dim=2, in_channels=8, in_h=5, in_w=5,
              in_d=1, fil_h=3, fil_w=3, fil_d=1, out_channels=8, batchsize=1, pad_h=1, pad_w=1, pad_d=0,
              conv_stride_h=1, conv_stride_w=1, conv_stride_d=0, dilation_h=1, dilation_w=1, dilation_d=0,
              bias=0, group_count=1)
XKEY = "2x8x5x5x1x3x3x1x8x1x1x1x0x1x1x0x1x1x0x0x1xNHWCxFP16xB"
TUNED = "32,16,16,2,1,16,16,0,0,0,1,-1,2"
INT_COLS = ("spatial_dim", "in_channels", "in_h", "in_w", "in_d", "fil_h", "fil_w", "fil_d", "out_channels",
            "batchsize", "pad_h", "pad_w", "pad_d", "conv_stride_h", "conv_stride_w", "conv_stride_d",
            "dilation_h", "dilation_w", "dilation_d", "bias", "group_count")
TEXT_COLS = ("layout", "data_type", "direction")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "default.udb"))
    monkeypatch.setenv("MIOPEN_DEBUG_DRIVER_PRNG_SEED", "7")


def miopen_lookup(path, fields):
    """MIOpen's FindRecord: every field in the WHERE clause, perf_db joined on config."""
    con = sqlite3.connect(path)
    where = " AND ".join(f"config.{n} = ?" for n in fields)
    rows = con.execute(f"SELECT solver, params FROM perf_db INNER JOIN config ON perf_db.config = config.id "
                       f"WHERE {where}", [str(v) for v in fields.values()]).fetchall()
    con.close()
    return dict(rows)


def miopen_create(path):
    """A user perf-db as MIOpen creates one (text fields, then integers, unique indexes)."""
    con = sqlite3.connect(path)
    cols = ", ".join([f"`{c}` TEXT NOT NULL" for c in TEXT_COLS] + [f"`{c}` INT NOT NULL" for c in INT_COLS])
    con.executescript(
        f"CREATE TABLE IF NOT EXISTS `config` (`id` INTEGER PRIMARY KEY ASC, {cols});"
        f"CREATE UNIQUE INDEX IF NOT EXISTS `idx_config` ON config( {', '.join(TEXT_COLS)}, {', '.join(INT_COLS)} );"
        "CREATE TABLE  IF NOT EXISTS `perf_db` (`id` INTEGER PRIMARY KEY ASC,`solver` TEXT NOT NULL,"
        "`config` INTEGER NOT NULL,`params` TEXT NOT NULL);"
        "CREATE UNIQUE INDEX IF NOT EXISTS `idx_perf_db` ON perf_db(solver, config);")
    con.commit()
    return con


def miopen_store(con, fields, solver, params):
    """MIOpen's UpdateUnsafe: INSERT OR IGNORE the config, INSERT OR REPLACE the perf_db row."""
    names = list(fields)
    con.execute(f"INSERT OR IGNORE INTO config( {', '.join(names)} ) VALUES( {', '.join('?' * len(names))});",
                [str(v) for v in fields.values()])
    where = " AND ".join(f"({n} = ? )" for n in names)
    con.execute(f"INSERT OR REPLACE INTO perf_db(config, solver, params) VALUES((SELECT id FROM config WHERE "
                f"( {where} ) ) , ? , ?);", [str(v) for v in fields.values()] + [solver, params])
    con.commit()


def test_tune_on_cpu_writes_a_record_miopen_reads(capsys, tmp_path):
    db = tmp_path / "tuned.udb"
    status, out, err = run_cli(capsys, "tune", *LINE.split(), "--backend", "cpu", "--max-configs", "2",
                               "--verify-top", "0", "--perfdb", db, "--json")
    assert status == 0, err
    winner = json.loads(out[0])["winner"]["perf_config"]
    # MIOpen's schema: the columns and types CreateQuery gives, and the two unique indexes
    con = sqlite3.connect(db)
    cfg = [(r[1], r[2], r[3]) for r in con.execute("PRAGMA table_info(config)")]
    assert cfg == [("id", "INTEGER", 0)] + [(c, "TEXT", 1) for c in TEXT_COLS] + [(c, "INT", 1) for c in INT_COLS]
    assert [(r[1], r[2], r[3]) for r in con.execute("PRAGMA table_info(perf_db)")] == \
        [("id", "INTEGER", 0), ("solver", "TEXT", 1), ("config", "INTEGER", 1), ("params", "TEXT", 1)]
    unique = {r[1]: r[2] for r in con.execute("PRAGMA index_list(perf_db)")}
    assert unique.get("idx_perf_db") == 1
    assert [r[2] for r in con.execute("PRAGMA index_info(idx_perf_db)")] == ["solver", "config"]
    assert [r[2] for r in con.execute("PRAGMA index_info(idx_config)")] == list(TEXT_COLS + INT_COLS)
    con.close()
    assert miopen_lookup(db, FIELDS) == {SOLVER_NAME: winner}
    # our extra data sits beside it
    rec = PerfDb(db).get(XKEY, "cpu", SOLVER_NAME)
    assert rec.values == winner and rec.time_ms > 0 and rec.device and rec.updated > 0


def test_a_miopen_db_is_read_and_written_by_us(capsys, tmp_path):
    """A user db MIOpen wrote (named as MIOpen names it: gfx942, 304 CUs) keeps MIOpen's
    records, answers our lookups, and takes ours where MIOpen finds them."""
    path = tmp_path / "gfx942130_1.1.0.udb"
    con = miopen_create(path)
    ck = "DeviceGroupedConvBwdDataMultipleD_Xdl_CShuffle_v1<256, 128, 256>+1"
    miopen_store(con, FIELDS, "ConvHipImplicitGemmGroupBwdXdlops", ck)
    con.close()
    with PerfDb(path) as db:
        assert db.miopen_arch == "gfx942"
        assert db.get(LEGACY_KEY, "gfx942", "ConvHipImplicitGemmGroupBwdXdlops").values == ck
        assert db.get(XKEY, "sm_90", "ConvHipImplicitGemmGroupBwdXdlops") is None
        assert db.update(XKEY, "gfx942", SOLVER_NAME, TUNED, 0.25)
        assert db.export_text("gfx942") == f"{XKEY}=ConvHipImplicitGemmGroupBwdXdlops:{ck};{SOLVER_NAME}:{TUNED}\n"
    assert miopen_lookup(path, FIELDS) == {"ConvHipImplicitGemmGroupBwdXdlops": ck, SOLVER_NAME: TUNED}
    # MIOpen replacing its own record does not disturb ours
    con = sqlite3.connect(path)
    miopen_store(con, FIELDS, "ConvHipImplicitGemmGroupBwdXdlops", "other+2")
    con.close()
    with PerfDb(path) as db:
        assert db.get(XKEY, "gfx942", SOLVER_NAME).time_ms == 0.25
        assert db.get(XKEY, "gfx942", "ConvHipImplicitGemmGroupBwdXdlops").time_ms is None
    # the CLI imports such a file for an arch, and a run reads it directly
    status, out, err = run_cli(capsys, "perfdb", "import", path, "--arch", "gfx942", "--perfdb", tmp_path / "o.udb")
    assert status == 0 and out[0].startswith("Imported 2 record(s) (1 for ConvDgradImplicitGemmTilde) for gfx942")
    status, out, err = run_cli(capsys, "config", *LINE.split(), "--arch", "gfx942", "--perfdb", path)
    assert status == 0 and any(TUNED in line for line in out)


def old_schema(path, rows):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE perf_db (problem_key TEXT NOT NULL, arch TEXT NOT NULL, solver TEXT NOT NULL, "
                "params TEXT NOT NULL, time_ms REAL, updated REAL NOT NULL, PRIMARY KEY (problem_key, arch, solver))")
    con.executemany("INSERT INTO perf_db VALUES (?, ?, ?, ?, ?, ?)", rows)
    con.commit()
    con.close()


OLD_ROWS = [
    (LEGACY_KEY, "cpu", SOLVER_NAME, TUNED, 1.5, 1700000000.0),
    (LEGACY_KEY, "cpu", "ConvOclDirectFwd", "16,16,8,1", None, 1700000001.0),
    (LEGACY_KEY, "sm_90", SOLVER_NAME, "64,64,32,2,2,32,32,0,0,0,1,-1,2", 0.5, 1700000002.0),
    ("8-5-5-3x3-8-5-5-1-1x1-1x1-1x1-0-NHWC-NCHW-NHWC-FP16-B", "cpu", SOLVER_NAME, TUNED, 2.0, 1700000003.0),
    ("576-4-4-1x1-192-4-4-8-1x1-2x2-3x3-0-NCHW-FP32-F", "cpu", "ConvAsm1x1U", "1,16,1,64,2,2,1,4", None, 1.0),
    ("not a key", "gfx942", "Anything", "x", 3.0, 2.0),
]


def test_an_old_perfdb_is_migrated_on_first_open_losing_nothing(capsys, tmp_path):
    path = tmp_path / "old.sqlite"
    old_schema(path, OLD_ROWS)
    with PerfDb(path) as db:
        recs = db.records()
        assert db.migrated == len(OLD_ROWS)
        assert db.miopen_arch == "cpu"                 # the arch with most convertible records
    seen = {(r.problem_key, r.arch, r.solver): (r.values, r.time_ms, r.updated) for r in recs}
    # cpu keys that convert become MIOpen's x-keys (by hand); the rest stay as they were
    converted = {LEGACY_KEY: XKEY, "576-4-4-1x1-192-4-4-8-1x1-2x2-3x3-0-NCHW-FP32-F":
                 "2x576x4x4x1x1x1x1x192x8x1x1x0x2x2x0x3x3x0x0x1xNCHWxFP32xF"}
    want = {}
    for key, arch, solver, params, ms, updated in OLD_ROWS:
        if arch == "cpu":
            key = converted.get(key, key)
        want[(key, arch, solver)] = (params, ms, updated)
    assert seen == want
    # MIOpen sees the converted cpu records; the old table is gone
    assert miopen_lookup(path, FIELDS) == {SOLVER_NAME: TUNED, "ConvOclDirectFwd": "16,16,8,1"}
    con = sqlite3.connect(path)
    assert "problem_key" not in [r[1] for r in con.execute("PRAGMA table_info(perf_db)")]
    con.close()
    # a run finds the migrated record by its problem, also under the legacy key
    with PerfDb(path) as db:
        assert db.get(LEGACY_KEY, "cpu", SOLVER_NAME).time_ms == 1.5
        assert db.get(LEGACY_KEY, "sm_90", SOLVER_NAME).values == "64,64,32,2,2,32,32,0,0,0,1,-1,2"
    status, out, _ = run_cli(capsys, *LINE.split(), "--backend", "cpu", "--perfdb", path)
    assert status == 0 and any(line.startswith(f"Using perf-db config {TUNED} (tuned 1.500000 ms)") for line in out)


def test_an_old_perfdb_on_read_only_storage_is_migrated_in_memory(tmp_path, monkeypatch):
    import os
    path = tmp_path / "old.sqlite"
    old_schema(path, OLD_ROWS)
    before = path.read_bytes()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: False if mode == os.W_OK else real(p, mode, *a, **k))
    with PerfDb(path) as db:
        assert db.get(LEGACY_KEY, "cpu", SOLVER_NAME).values == TUNED and len(db.records()) == len(OLD_ROWS)
    assert path.read_bytes() == before


def test_the_earlier_default_location_is_copied_on_first_use(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("MIOPEN_USER_DB_PATH", str(tmp_path / "udb"))
    old = legacy_default_path()
    old.parent.mkdir(parents=True)
    old_schema(old, OLD_ROWS[:1])
    before = old.read_bytes()
    with PerfDb() as db:                               # a lookup reads it and writes nothing
        assert db.get(LEGACY_KEY, "cpu", SOLVER_NAME).values == TUNED
    assert not (tmp_path / "udb").exists()
    with PerfDb() as db:                               # a write copies it to MIOpen's user db dir
        db.update(XKEY, "sm_90", SOLVER_NAME, TUNED, 1.0)
    assert (tmp_path / "udb" / "miopen-dgrad_1.1.0.udb").is_file() and old.read_bytes() == before
    assert miopen_lookup(tmp_path / "udb" / "miopen-dgrad_1.1.0.udb", FIELDS) == {SOLVER_NAME: TUNED}


# ------------------------------------------------------------------ the text form
MIOPEN_TEXT = (
    "2x1280x4x4x1x3x3x1x1280x8x1x1x0x1x1x0x1x1x0x0x1xNHWCxFP16xB=ConvHipImplicitGemmGroupBwdXdlops:"
    "DeviceGroupedConvBwdDataMultipleD_Xdl_CShuffle_v1<256, 128, 256, 32, Default, 8, 2>+4;"
    "ConvDirectNaiveConvBwd:1\n"
    f"{XKEY}=GemmBwdRest:1;ConvAsmImplicitGemmGTCDynamicBwdXdlopsNHWC:256,128,32,32,32,8,2,2,2,2,0,0,0,0,0\n"
    "2x64x7x7x1x1x1x1x128x4x0x0x0x1x1x0x1x1x0x0x1xNCHWxFP32xF=ConvBinWinogradRxSf2x3g1:1\n"
)


def test_miopen_text_round_trips_byte_for_byte(capsys, tmp_path):
    src = tmp_path / "gfx942130.HIP.3_5_1_dabb6df2b9.udb.txt"
    src.write_bytes(MIOPEN_TEXT.encode())
    db = tmp_path / "db.udb"
    status, out, err = run_cli(capsys, "perfdb", "import", src, "--arch", "gfx942", "--perfdb", db)
    assert status == 0 and err == []
    dest = tmp_path / "again.udb.txt"
    status, out, err = run_cli(capsys, "perfdb", "export", "--arch", "gfx942", "--perfdb", db, "-o", dest)
    assert status == 0 and dest.read_bytes() == MIOPEN_TEXT.encode()
    # a record we add joins its key's line; MIOpen's entries keep their bytes and order
    with PerfDb(db) as d:
        d.update(XKEY, "gfx942", SOLVER_NAME, TUNED, 1.0)
    status, out, _ = run_cli(capsys, "perfdb", "export", "--arch", "gfx942", "--perfdb", db)
    assert out[1] == MIOPEN_TEXT.splitlines()[1] + f";{SOLVER_NAME}:{TUNED}"
    assert [out[0], out[2]] == [MIOPEN_TEXT.splitlines()[0], MIOPEN_TEXT.splitlines()[2]]


def test_miopen_user_db_names():
    """Handle::GetDbBasename: DbId, then _<CUs> up to 64 CUs, else the CU count in hex."""
    assert db_basename("gfx942", 304) == "gfx942130"               # 304 = 0x130
    assert db_basename("gfx942", 64) == "gfx942_64" and db_basename("gfx942", 65) == "gfx94241"
    assert db_basename("gfx90a:sramecc+:xnack-", 110) == "gfx90a6e"
    assert db_basename("gfx90a:sramecc+:xnack+", 104) == "gfx90a_xnack68"
    assert db_basename("gfx908:sramecc-", 120) == "gfx908_nosramecc78"
    assert db_basename("gfx1201", 32) == "gfx1201_32"
    assert user_perfdb_name("gfx942", 304) == "gfx942130_1.1.0.udb"
    assert user_perfdb_name("gfx942", 304, text=True, suffix="HIP.3_5_1_dabb6df2b9") == \
        "gfx942130.HIP.3_5_1_dabb6df2b9.udb.txt"
    assert arch_from_filename("gfx942130_1.1.0.udb") == "gfx942"
    assert arch_from_filename("gfx1201_32.HIP.3_5_1_dabb6df2b9.udb.txt") == "gfx1201"
    assert arch_from_filename("perfdb.sqlite") is None
    with pytest.raises(ValueError):
        db_basename("gfx942", 0)
    # a feature it would have to guess at: no + or -, unknown, empty, or given twice
    for arch in ("gfx908:sramecc", "gfx908:foo", "gfx908:", "gfx90a:xnack+:xnack-", "gfx942:SRAMECC+"):
        with pytest.raises(ValueError, match="target features are sramecc"):
            db_basename(arch, 120)


def test_perfdb_name_subcommand(capsys):
    status, out, err = run_cli(capsys, "perfdb", "name", "--arch", "gfx942", "--cus", "304")
    assert status == 0 and out[0].endswith("/gfx942130_1.1.0.udb")
    status, out, err = run_cli(capsys, "perfdb", "name", "--arch", "gfx942", "--cus", "304", "--text",
                               "--suffix", "HIP.3_5_1_dabb6df2b9")
    assert status == 0 and out[0].endswith("/gfx942130.HIP.3_5_1_dabb6df2b9.udb.txt")
    status, out, err = run_cli(capsys, "perfdb", "name", "--arch", "gfx942", "--cus", "0")
    assert status == 2 and len(err) == 1 and err[0].startswith("dgrad-driver: error: --cus 0")
