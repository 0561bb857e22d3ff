"""Regression fixtures: real MIOpenDriver lines pinned to verdicts, kernels and numerics.

Format
------
A fixture file is JSON Lines (``*.jsonl``, UTF-8): one record per line, keys sorted, so a
person can read it and ``git diff`` shows exactly which expectation moved. Blank lines are
allowed; nothing else (no comments). A record::

    {"command": "<MIOpenDriver line, verbatim>",
     "expect": {...},                     # the golden; written by update, absent = none yet
     "id": "<unique slug: letters, digits, _ . ->",
     "perf_config": "a,b,...",            # optional: pin this config instead of the default
     "source": "<where the line comes from: file:line, issue, PR, or 'constructed: why'>"}

``perf_config`` (optional) is run on every golden target and in the numerics instead of the
default config (``DgradSolver.get_solution`` with it): how a kernel no default chooses,
e.g. split-K through the workspace, is pinned. A golden target that refuses it (an
NVIDIA-only body on gfx942) pins the refusal instead: ``perf_config_refused``, the
:class:`PerfConfigError` text. Its syntax
(:meth:`~miopen_solver.config.PerfConfig.parse`) is checked when the file is loaded: a
malformed one is a :class:`FixtureError` (bad input), not a failed replay.

``expect`` for a line the parser rejects::

    {"parse_error": {"flag": "-F", "message": "<MiopenCommandError text>", "value": "1"}}

``expect`` otherwise::

    {"problem_key": "<MIOpen perf-db key, direction B>",
     "targets": {                          # one entry per arch in GOLDEN_TARGETS
         "<arch>": {"applicable": bool, "reasons": [codes], "notes": [codes],
                    # only when applicable -- the default config (or the record's
                    # perf_config) and its kernel:
                    "perf_config": "a,b,...",
                    "kernel_name": "..." (the Solution's: "+transpose_dy_w_dx" and the like
                                          when NCHW tensors are transposed around the kernel),
                    "grid": [x, y, z], "block": threads, "shared_bytes": n,
                    "source_sha256": "<sha256 of the emitted text>",
                    "defines_sha256": "<sha256 of the emitted defines only>",
                    # only when the batch is split along N (tensors past 2^31-1 bytes):
                    "split_n": [launches, images per launch],
                    # only when the solution needs a device workspace (NCHW tensors'
                    # copies, split-K's fp32 slices):
                    "workspace_bytes": n,
                    # instead of the kernel fields, when the record's perf_config is not
                    # valid on this target (applicable stays true: the default would run):
                    "perf_config_refused": "<the config error>"}},
     "numerics": {"command": "<the shrunk line actually run>",
                  "ok": bool, "rms_error": float (3 significant digits), "tolerance": float,
                  # only when the record's perf_config is valid on a GPU target alone
                  # (e.g. a warpgroup schedule): the first golden target taking it,
                  # simulated on the CPU engine, as `run --backend cpu --arch <arch>` runs it
                  "arch": "<arch>@cpu"}
                 | {"command": "...", "skipped": "<why>"}}

``source_sha256`` covers the whole kernel text (defines + ``dgrad.cu``), so an edit of the
kernel body moves every one of them; ``defines_sha256`` covers what the emitter
specialises per problem/config, so an emitter change that should touch one class of
kernels can be checked not to move the others.

No code-object hash is pinned: clang-19 builds an AMD code object in about 0.2 s, but its
bytes differ from run to run (the object embeds a ``__hip_cuid_<hash>`` symbol derived from
the temporary source path) and from one clang build to the next, so ``source_sha256`` (the
compiler's exact input) is what is pinned.

Numerics
--------
Each problem is shrunk (:func:`shrink`: batch cut to :data:`NUMERIC_BATCH`, the same
spatial geometry, channels halved while the problem exceeds :data:`FLOP_BUDGET` or
:data:`ELEMENT_BUDGET`), its inputs generated as MIOpenDriver does (:mod:`.prng`, seed
:data:`NUMERIC_SEED`), run on an engine with the target's default config, and compared
with the float64 reference (:func:`.reference.verify`, MIOpen's rms error and tolerance).

The dX bytes are **not** pinned: numpy's fp32 matmul goes through the BLAS build's kernel
for the CPU at hand, and other kernels sum in another order (measured here: OpenBLAS
SkylakeX, Haswell, Sandybridge and Prescott kernels give four different dX hashes and fp32
rms errors between 5.2e-8 and 8.8e-8 for one problem). Instead the rms error is pinned
within a band (:func:`rms_in_band`): a CPU replay passes when ``ok`` holds and
``golden / r - floor <= error <= golden * r + floor`` with ``r`` from :data:`BAND_RATIO`
(4 for fp32, whose error is accumulation-order noise; 1.25 for fp16/bf16, whose error is
dominated by rounding dX to the storage type) and ``floor = tolerance * BAND_FLOOR``.
Numerics on a GPU backend are checked against the tolerance only (a different engine
sums differently); problems that are not all-NHWC are skipped there with a note.

Outcomes (:class:`Result`): ``passed``; ``drifted`` (something differs from the golden,
each difference a :class:`Drift`); ``failed`` (the numerics do not verify, the CPU rms
error rose above its band, or computing the record raised). :func:`update_golden` writes
drifted records only, so a numeric regression is never baked into the golden by a routine
regeneration; to re-pin a fixture whose error rose on purpose, delete its ``expect`` and
update it alone (``--only ID``). The library never prints; ``driver/replay_cmd.py`` does.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import math
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import prng
from .command import format_command, parse
from .errors import FileError, MiopenCommandError, PerfConfigError, short_text, shown_path
from .fileio import read_text, write_text
from .problem import DTYPE_BYTES, ConvProblem
from .solver import DgradSolver
from .target import Target, get_target
from .text import json_error, json_text, shorten, text_lines
from .tf32 import resolve as resolve_tf32

GOLDEN_TARGETS = ("gfx942", "sm_90")
"""Arch presets every fixture's applicability and emission are pinned for."""

NUMERIC_SEED = prng.DEFAULT_SEED
"""PRNG seed of every numeric run (MIOpenDriver's default; the environment is ignored)."""

NUMERIC_BATCH = 2
"""Batch size of the shrunk problem (smaller batches are kept)."""

FLOP_BUDGET = 1_000_000_000
"""Largest ``ConvProblem.flops`` of a shrunk problem before its channels are halved."""

ELEMENT_BUDGET = 4_000_000
"""Largest element count of each of dX, dY and W of a shrunk problem."""

BAND_RATIO = {"fp32": 4.0, "fp16": 1.25, "bf16": 1.25, "tf32": 1.25}
"""Allowed ratio between a CPU rms error and its golden, per data type (``tf32``: fp32 with
TF32 math, whose error is dominated by rounding the inputs, like fp16's by rounding dX)."""

BAND_FLOOR = 1e-5
"""Absolute slack of the band, as a fraction of the tolerance."""

REGENERATE_COMMAND = "dgrad-driver replay fixtures/ --update-golden"
"""The one command that rewrites the golden."""

RECORD_KEYS = ("command", "expect", "id", "perf_config", "source")
_REQUIRED_KEYS = ("command", "id", "source")
_ID_RE = re.compile(r"[A-Za-z0-9_.\-]+")

PASSED, DRIFTED, FAILED = "passed", "drifted", "failed"

MAX_FILE_BYTES = 64 << 20
"""The largest fixture file read (64 MiB; the committed ones are a few hundred KiB)."""

_NUMBER = "number"
_MAGNITUDE = "magnitude"
"""A finite number >= 0 (an rms error, a tolerance: ``NaN``, an infinity or a negative
one would make every replay drift, or pass, whatever the code computes)."""
_COUNT = "count"
"""An integer >= 0 (bytes, a count)."""
_POSITIVE = "positive"
"""An integer >= 1 (threads, blocks, images)."""
_SHA256 = "sha256"
"""64 lower-case hex digits."""
_GRID = "grid"
"""A list of 3 integers >= 1 (a launch grid)."""
_TARGET_SCHEMA = {"applicable": bool, "reasons": [str], "notes": [str], "perf_config": str,
                  "kernel_name": str, "grid": _GRID, "block": _POSITIVE, "shared_bytes": _COUNT,
                  "source_sha256": _SHA256, "defines_sha256": _SHA256, "split_n": [_POSITIVE],
                  "workspace_bytes": _COUNT, "perf_config_refused": str}
_EXPECT_SCHEMA = {
    "parse_error": {"flag": str, "message": str, "value": (str, None)},
    "problem_key": str,
    "targets": {arch: _TARGET_SCHEMA for arch in GOLDEN_TARGETS},
    "numerics": {"command": str, "ok": bool, "rms_error": _MAGNITUDE, "tolerance": _MAGNITUDE, "nonfinite": _COUNT,
                 "skipped": str, "arch": str},
}
"""The shape of ``expect`` (module docstring): a dict maps keys to the shape of their value
(``"*"``: any key; ``targets`` takes the :data:`GOLDEN_TARGETS` alone), ``[t]`` is a list of
``t``, a tuple allows several, ``None`` is JSON null."""

_TYPE_NAMES = {str: "a string", bool: "true or false", int: "an integer", _NUMBER: "a number",
               _MAGNITUDE: "a finite number >= 0", None: "null", _COUNT: "an integer >= 0",
               _POSITIVE: "an integer >= 1", _SHA256: "64 lower-case hex digits", _GRID: "a list of 3 integers >= 1"}


class FixtureError(ValueError):
    """A fixture path that does not exist or a fixture file that is malformed. The message
    is one line and starts with ``path:line:`` where a line is known."""


# ------------------------------------------------------------------ records and files
@dataclass(frozen=True)
class Fixture:
    """One fixture record, and where it was read from (``path``, 1-based ``line``)."""

    id: str
    source: str
    command: str
    expect: dict | None = None
    path: str = ""
    line: int = 0
    perf_config: str | None = None

    def record(self) -> dict:
        """The JSON record (``expect`` omitted when there is no golden, ``perf_config`` when
        the default runs)."""
        rec = {"command": self.command, "id": self.id, "source": self.source}
        if self.expect is not None:
            rec["expect"] = self.expect
        if self.perf_config is not None:
            rec["perf_config"] = self.perf_config
        return rec

    def with_expect(self, expect: dict | None) -> "Fixture":
        return dataclasses.replace(self, expect=expect)


def dumps(record: dict) -> str:
    """One record as its canonical line: JSON, keys sorted, no trailing newline."""
    return json_text(record, sort_keys=True, ensure_ascii=False)


def fixture_files(paths) -> list:
    """The ``*.jsonl`` files named by ``paths`` (files as given; directories searched
    recursively, sorted). Raises FixtureError for an empty path (``Path('')`` would be the
    working directory), a missing path or a directory without fixtures."""
    files = []
    for raw in paths:
        if not str(raw):
            raise FixtureError("'' is empty (no file named); allowed: fixture files (*.jsonl) or directories of them")
        p = Path(raw)
        try:
            if p.is_dir():
                found = sorted(p.rglob("*.jsonl"))
                if not found:
                    raise FixtureError(f"{shown_path(raw)}: no *.jsonl fixture files in this directory; "
                                       f"allowed: {FIXTURE_PATHS_ALLOWED}")
                files.extend(found)
            elif p.exists():            # not only regular files: load_file says why it refuses one
                files.append(p)
            else:
                raise FixtureError(f"{shown_path(raw)}: no such fixture file or directory; allowed: {FIXTURE_PATHS_ALLOWED}")
        except OSError as e:  # a name the OS refuses (too long), an unreadable directory
            raise FixtureError(f"{shown_path(raw)}: cannot read ({e.strerror or e})") from None
    return files


FIXTURE_PATHS_ALLOWED = "fixture files (*.jsonl) or directories holding them (default ./fixtures)"
"""What ``replay`` takes as its paths, for a message."""
RECORD_ALLOWED = ("one JSON object per line with the keys id, source and command at least "
                  "(fixtures/README.md)")
"""What a fixture line must be, for a message."""


def load_file(path) -> list:
    """The fixtures of one file, in file order.

    Raises:
        FixtureError: unreadable file, a line that is not a JSON object, a missing or
            unknown key, a field of the wrong type, a malformed id, or an id repeated in
            the file.
    """
    path = str(path)
    try:
        text = read_text(path, MAX_FILE_BYTES, "UTF-8 JSON Lines fixture file")
    except FileError as e:
        raise FixtureError(str(e)) from None
    out, seen = [], {}
    for n, line in enumerate(text_lines(text), 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise FixtureError(f"{where}: not valid JSON ({json_error(e)}); allowed: {RECORD_ALLOWED}") from None
        except ValueError:              # json's int(): a number past Python's digit limit
            raise FixtureError(f"{where}: not valid JSON (a number of more than "
                               f"{sys.get_int_max_str_digits()} digits)") from None
        except RecursionError:
            raise FixtureError(f"{where}: JSON nested too deeply") from None
        if not isinstance(rec, dict):
            raise FixtureError(f"{where}: a record must be a JSON object, got {type(rec).__name__}")
        missing = [k for k in _REQUIRED_KEYS if k not in rec]
        if missing:
            raise FixtureError(f"{where}: missing key(s) {', '.join(missing)}; allowed: {RECORD_ALLOWED}")
        unknown = sorted(set(rec) - set(RECORD_KEYS))
        if unknown:
            raise FixtureError(f"{where}: unknown key(s) {', '.join(unknown)}; "
                               f"allowed: {', '.join(RECORD_KEYS)}")
        for k in _REQUIRED_KEYS:
            if not isinstance(rec[k], str) or not rec[k].strip():
                raise FixtureError(f"{where}: {k} must be a non-empty string")
        if "perf_config" in rec:
            _check_perf_config(rec["perf_config"], where)
        if not _ID_RE.fullmatch(rec["id"]):
            raise FixtureError(f"{where}: id {rec['id']!r} may hold only letters, digits, '_', '.', '-'")
        if "expect" in rec:
            check_expect(rec["expect"], where)
        if rec["id"] in seen:
            raise FixtureError(f"{where}: duplicate id {rec['id']!r} (first at line {seen[rec['id']]})")
        seen[rec["id"]] = n
        out.append(Fixture(id=rec["id"], source=rec["source"], command=rec["command"],
                           expect=rec.get("expect"), path=path, line=n, perf_config=rec.get("perf_config")))
    return out


def _check_perf_config(value, where: str) -> None:
    """A fixture's ``perf_config``: a serialised PerfConfig (:meth:`PerfConfig.parse`'s
    syntax: field count, integers, 32-bit range, schedule and reduction codes). Whether it
    suits the problem on each target is the replay's question (the golden pins that).

    Raises:
        FixtureError: naming ``where``, the field, the value and what is allowed.
    """
    from .config import PerfConfig
    if not isinstance(value, str) or not value.strip():
        raise FixtureError(f"{where}: perf_config must be a non-empty string (a serialised PerfConfig)")
    try:
        PerfConfig.parse(value)
    except PerfConfigError as e:
        raise FixtureError(f"{where}: perf_config {shorten(value)!r}: {e}") from None


def _check_shape(value, shape, key: str, where: str) -> None:
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            raise FixtureError(f"{where}: {key} must be a JSON object, got {_json_type(value)}")
        for k, v in value.items():
            sub = shape.get(k, shape.get("*"))
            if sub is None:
                raise FixtureError(f"{where}: unknown key {short_text(f'{key}.{k}')}; allowed: {', '.join(shape)}")
            _check_shape(v, sub, f"{key}.{k}", where)
    elif isinstance(shape, list):
        if not isinstance(value, list):
            raise FixtureError(f"{where}: {key} must be a JSON list, got {_json_type(value)}")
        for i, v in enumerate(value):
            _check_shape(v, shape[0], f"{key}[{i}]", where)
    else:
        shapes = shape if isinstance(shape, tuple) else (shape,)
        if not any(_is(value, t) for t in shapes):
            numeric = any(t in shapes for t in (_MAGNITUDE, _COUNT, _POSITIVE)) and _is(value, _NUMBER)
            shown = (numeric or (_SHA256 in shapes and isinstance(value, str))
                     or (_GRID in shapes and isinstance(value, list)))
            got = _json_number(value) if shown else _json_type(value)
            raise FixtureError(f"{where}: {key} must be {' or '.join(_TYPE_NAMES[t] for t in shapes)}, got {got}")


def _is(value, t) -> bool:
    if t is None:
        return value is None
    if t is _NUMBER:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t is _MAGNITUDE:
        return _is(value, _NUMBER) and (isinstance(value, int) or math.isfinite(value)) and value >= 0
    if t is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if t is _COUNT or t is _POSITIVE:
        return _is(value, int) and value >= (1 if t is _POSITIVE else 0)
    if t is _SHA256:
        return isinstance(value, str) and re.fullmatch(r"[0-9a-f]{64}", value) is not None
    if t is _GRID:
        return isinstance(value, list) and len(value) == 3 and all(_is(v, _POSITIVE) for v in value)
    return isinstance(value, t)


def _json_number(value) -> str:
    """A number as the file spells it (``NaN``, ``-Infinity``, ``-0.5``)."""
    return shorten(json.dumps(value))


def _json_type(value) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)


def check_expect(expect, where: str = "expect") -> None:
    """Raise :class:`FixtureError` (prefixed ``where``) unless ``expect`` has the shape of
    a golden record (module docstring): known keys only, each of its type, so replay and
    comparison never meet a value they cannot handle."""
    _check_shape(expect, _EXPECT_SCHEMA, "expect", where)


def load(paths) -> list:
    """Every fixture under ``paths`` (files and/or directories), file by file in order.

    Raises:
        FixtureError: see :func:`fixture_files` and :func:`load_file`; also an id that
            appears in two files, and ``paths`` that are not a path or a list of paths.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if not isinstance(paths, (list, tuple)) or not all(isinstance(p, (str, Path)) for p in paths):
        raise FixtureError(f"fixture paths {shorten(repr(paths))}: allowed: a path (str or Path) or a list of them")
    fixtures, where = [], {}
    for f in fixture_files(paths):
        for fx in load_file(f):
            if fx.id in where:
                raise FixtureError(f"{fx.path}:{fx.line}: duplicate id {fx.id!r} (also at {where[fx.id]})")
            where[fx.id] = f"{fx.path}:{fx.line}"
            fixtures.append(fx)
    return fixtures


def select(fixtures, pattern: str | None) -> list:
    """Fixtures whose id matches ``pattern``: a shell-style pattern (``*``, ``?``, ``[]``)
    matched against the whole id, or, without wildcards, a substring of the id.

    Raises:
        ValueError: a ``pattern`` that is neither a string nor None.
    """
    if pattern is not None and not isinstance(pattern, str):
        raise ValueError(f"fixture pattern {shorten(repr(pattern))}: allowed: a string or None")
    if not pattern:
        return list(fixtures)
    if any(ch in pattern for ch in "*?["):
        return [f for f in fixtures if fnmatch.fnmatchcase(f.id, pattern)]
    return [f for f in fixtures if pattern in f.id]


def write_file(path, fixtures) -> None:
    """Rewrite ``path`` with ``fixtures`` as canonical lines (see :func:`dumps`), whole or
    not at all (:func:`miopen_solver.fileio.write_text`).

    Raises:
        FixtureError: the path cannot be written (the old file is left as it was).
    """
    try:
        write_text(path, "".join(dumps(f.record()) + "\n" for f in fixtures))
    except FileError as e:
        raise FixtureError(f"{path}: {e.reason}") from None


# ------------------------------------------------------------------ the shrunk problem
def _halve(x: int) -> int:
    """Half of ``x``, keeping an odd count odd (odd channel counts are part of a fixture's
    point): ``64 -> 32``, ``419 -> 209``, ``3 -> 1``."""
    return x // 2 if x % 2 == 0 else max(1, (x // 2) | 1)


def _too_big(q: ConvProblem) -> bool:
    return q.flops > FLOP_BUDGET or max(q.dx_elems, q.dy_elems, q.w_elems) > ELEMENT_BUDGET


def shrink(problem: ConvProblem) -> ConvProblem:
    """The copy of ``problem`` the numerics run on.

    Rule: ``N = min(N, NUMERIC_BATCH)``; the spatial geometry (sizes, filter, pads,
    strides, dilations), dtype, layouts and mode are kept; then, while the problem's flops
    exceed :data:`FLOP_BUDGET` or one tensor exceeds :data:`ELEMENT_BUDGET` elements, the
    larger of kpg and cpg (kpg on a tie) is halved by :func:`_halve`, and once both are 1
    the group count is. C and K follow as ``cpg*G`` and ``kpg*G``.
    """
    q = problem.replace(N=min(problem.N, NUMERIC_BATCH))
    while _too_big(q):
        cpg, kpg, g = q.cpg, q.kpg, q.G
        if max(cpg, kpg) > 1:
            if kpg >= cpg:
                kpg = _halve(kpg)
            else:
                cpg = _halve(cpg)
        elif g > 1:
            g = _halve(g)
        else:
            break
        q = q.replace(C=cpg * g, K=kpg * g, G=g)
    return q


# ------------------------------------------------------------------ computing a record
def round_sig(x: float, digits: int = 3) -> float:
    """``x`` rounded to ``digits`` significant digits (non-finite values unchanged)."""
    if not math.isfinite(x) or x == 0:
        return x
    return float(f"{x:.{digits - 1}e}")


def defines_sha256(source) -> str:
    """sha256 over a KernelSource's vendor and ``(name, value)`` defines, one per line."""
    text = source.vendor + "\n" + "".join(f"{k}={v}\n" for k, v in source.defines)
    return hashlib.sha256(text.encode()).hexdigest()


def target_record(problem: ConvProblem, target: Target, perf_config: str | None = None) -> dict:
    """Applicability codes on ``target`` and, when applicable, the default config (or
    ``perf_config``), its kernel name, launch shape and emission hashes (see the module
    docstring).

    Raises:
        PerfConfigError, ImportError, ...: whatever spec building or emission raises
            (replay turns it into a failure).
    """
    solver = DgradSolver()
    problem, _ = resolve_tf32(problem, target)     # as the driver does: -M 0 without TF32 runs IEEE fp32
    verdict = solver.is_applicable(problem, target)
    rec = {"applicable": verdict.ok, "reasons": [r.code for r in verdict.reasons],
           "notes": [n.code for n in verdict.notes]}
    if verdict.ok and perf_config is not None:
        ok, why = solver.is_valid_performance_config(problem, target, _config(perf_config))
        if not ok:
            rec["perf_config_refused"] = why
            return rec
    if verdict.ok:
        sol = solver.get_solution(problem, target, _config(perf_config))    # split-N decided
        spec = sol.spec
        src = spec.emit()
        rec.update(perf_config=sol.perf_config.serialize(), kernel_name=sol.kernel_name,
                   grid=list(src.grid), block=src.block[0], shared_bytes=src.shared_bytes,
                   source_sha256=src.sha256, defines_sha256=defines_sha256(src))
        if sol.n_chunks > 1:        # split-N: launches x images per launch
            rec["split_n"] = [sol.n_chunks, sol.chunk_images]
        if sol.workspace_bytes:     # NCHW copies (kernel_name says which), split-K slices (_skws)
            rec["workspace_bytes"] = sol.workspace_bytes
    return rec


def _config(text: str | None):
    from .config import PerfConfig
    return None if text is None else PerfConfig.parse(text)


def _simulated_target(problem: ConvProblem, cfg) -> Target | None:
    """The first golden target on which ``problem`` is applicable and ``cfg`` valid, or None."""
    solver = DgradSolver()
    for arch in GOLDEN_TARGETS:
        t = get_target(arch)
        if solver.is_applicable(problem, t).ok and solver.is_valid_performance_config(problem, t, cfg)[0]:
            return t
    return None


def numerics_record(problem: ConvProblem, engine, perf_config: str | None = None) -> dict:
    """Run the shrunk problem on ``engine`` with the default config (or ``perf_config``)
    and verify it (see the module docstring).

    ``engine`` is a :class:`~miopen_solver.runtime.base.Engine` (in this process) or anything
    with its ``name``, ``target`` and ``verify(solution, seed)`` (the driver's verification
    worker, for GPU backends).

    The numeric target is the engine's (``cpu`` for the CPU engine); on the CPU engine a
    ``perf_config`` the cpu target refuses runs on the first golden target that takes it,
    simulated (``arch``: ``"<arch>@cpu"``). Returns ``{"command", "ok", "rms_error",
    "tolerance"[, "arch"]}`` or ``{"command", "skipped"}``.
    """
    q = shrink(problem)
    rec = {"command": format_command(q)}
    if q.is_3d or q.mode != "conv":
        rec["skipped"] = "the reference covers 2-D convolutions in mode conv only"
        return rec
    target = engine.target
    if target.is_gpu and not q.nhwc_memory:
        rec["skipped"] = (f"GPU numerics run NHWC problems only (dX {q.in_layout}, "
                          f"dY {q.out_layout}, W {q.fil_layout})")
        return rec
    solver = DgradSolver()
    cfg = _config(perf_config)
    if cfg is not None and not target.is_gpu and not solver.is_valid_performance_config(q, target, cfg)[0]:
        simulated = _simulated_target(q, cfg)
        if simulated is not None:       # a GPU-only config: its target simulated on the CPU engine
            from .runtime.cpu import CpuEngine
            engine, target = CpuEngine(simulated), simulated
            rec["arch"] = f"{simulated.arch}@cpu"
    verdict = solver.is_applicable(q, target)
    if not verdict.ok:
        rec["skipped"] = f"not applicable on {target.arch}: " + "+".join(verdict.codes)
        return rec
    v = engine.verify(solver.get_solution(q, target, cfg), NUMERIC_SEED)
    rec.update(ok=bool(v.ok), rms_error=round_sig(v.error), tolerance=v.tolerance)
    if v.nonfinite:
        rec["nonfinite"] = v.nonfinite
    return rec


def compute(command: str, engine=None, *, numerics: bool = True,
            targets=GOLDEN_TARGETS, perf_config: str | None = None) -> dict:
    """The ``expect`` record of ``command`` as the code computes it now.

    Args:
        command: an MIOpenDriver line.
        engine: the engine for the numerics (default: the CPU engine).
        numerics: False leaves the ``numerics`` key out (emission-only checks).
        targets: arch presets to record.
        perf_config: the config to run instead of the default (a fixture's ``perf_config``).

    Raises:
        Exception: whatever spec building, emission or the engine raises.
    """
    try:
        cmd = parse(command)
    except MiopenCommandError as e:
        return {"parse_error": {"flag": e.flag, "value": e.value, "message": str(e)}}
    p = cmd.problem
    out = {"problem_key": p.problem_key(),
           "targets": {arch: target_record(p, get_target(arch), perf_config) for arch in targets}}
    if numerics:
        if engine is None:
            from .runtime import get_engine
            engine = get_engine("cpu")
        out["numerics"] = numerics_record(p, engine, perf_config)
    return out


# ------------------------------------------------------------------ comparing
@dataclass(frozen=True)
class Drift:
    """One difference between the golden and what the code computes now.

    Attributes:
        path: dotted key path (``targets.sm_90.kernel_name``; ``expect`` when there is no
            golden at all).
        expected: the golden value (None when absent).
        actual: the value now (None when absent).
        kind: ``"hash"`` (a ``*_sha256`` field), ``"numeric"`` (rms error outside the
            band), ``"missing"`` (no golden), or ``"value"``.
    """

    path: str
    expected: object
    actual: object
    kind: str = "value"


def flatten(d: dict, prefix: str = "") -> dict:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists stay values)."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


BAND_DTYPES = tuple(dict.fromkeys((*BAND_RATIO, *DTYPE_BYTES)))
"""The dtypes an rms band is judged for: :data:`BAND_RATIO`'s, and every problem dtype (the
others at fp32's ratio)."""
NUMERICS_MODES = ("band", "gpu", "skip")
"""How :func:`compare` treats the numerics fields."""


def rms_in_band(golden: float, actual: float, tolerance: float, dtype: str) -> bool:
    """Whether a CPU rms error is close enough to its golden (module docstring rule).

    Raises:
        ValueError: a ``dtype`` that is no problem's (:data:`BAND_DTYPES`).
    """
    if dtype not in BAND_DTYPES:
        raise ValueError(f"dtype {dtype!r}; allowed: {', '.join(BAND_DTYPES)}")
    if not (isinstance(golden, (int, float)) and isinstance(actual, (int, float))):
        return False
    if not (math.isfinite(golden) and math.isfinite(actual)):
        return False
    r = BAND_RATIO.get(dtype, 4.0)
    floor = tolerance * BAND_FLOOR
    return golden / r - floor <= actual <= golden * r + floor


def compare(expected: dict | None, actual: dict, *, dtype: str = "fp32",
            numerics: str = "band") -> list:
    """Differences between a golden ``expect`` and a freshly computed one.

    Args:
        dtype: the problem's data type (selects the rms band).
        numerics: ``"band"`` (CPU: every numerics field equal, rms error within the band),
            ``"gpu"`` (only the shrunk command is compared; the verdict is judged by
            :func:`failures`) or ``"skip"`` (numerics not compared at all).

    Returns:
        A list of :class:`Drift`, in key order; empty when nothing moved.

    Raises:
        ValueError: a ``numerics`` mode or ``dtype`` not listed above (a typo would compare
            by another rule than the caller meant).
    """
    if numerics not in NUMERICS_MODES:
        raise ValueError(f"numerics {numerics!r}; allowed: {', '.join(NUMERICS_MODES)}")
    if dtype not in BAND_DTYPES:
        raise ValueError(f"dtype {dtype!r}; allowed: {', '.join(BAND_DTYPES)}")
    if expected is None:
        return [Drift("expect", None, "(computed now; no golden yet)", "missing")]
    exp, act = flatten(expected), flatten(actual)
    tol = expected.get("numerics", {}).get("tolerance", 0.0) or 0.0
    out = []
    for key in sorted(set(exp) | set(act)):
        if key.startswith("numerics."):
            if numerics == "skip" or (numerics == "gpu" and key != "numerics.command"):
                continue
        e, a = exp.get(key), act.get(key)
        if key == "numerics.rms_error" and e is not None and a is not None:
            if not rms_in_band(e, a, tol, dtype):
                out.append(Drift(key, e, a, "numeric"))
            continue
        if e != a or (key in exp) != (key in act):
            out.append(Drift(key, e, a, "hash" if key.endswith("sha256") else "value"))
    return out


def failures(actual: dict) -> list:
    """Why a computed record is a failure (numerics that do not verify), as sentences."""
    num = actual.get("numerics") or {}
    if "ok" in num and not num["ok"]:
        extra = f", {num['nonfinite']} non-finite dX values" if num.get("nonfinite") else ""
        return [f"numerics do not verify: rms error {num.get('rms_error')} >= tolerance "
                f"{num.get('tolerance')}{extra} (shrunk line: {num.get('command')})"]
    return []


# ------------------------------------------------------------------ replay
@dataclass
class Result:
    """The outcome of replaying one fixture.

    Attributes:
        fixture: the fixture replayed.
        status: ``passed``, ``drifted`` or ``failed``.
        drifts: what moved against the golden.
        failures: why it failed (sentences).
        notes: what was skipped or not compared, and why.
        actual: the record computed now (None when computing it raised).
        seconds: wall time of the replay.
    """

    fixture: Fixture
    status: str
    drifts: list = field(default_factory=list)
    failures: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    actual: dict | None = None
    seconds: float = 0.0
    engine: str = "cpu"


def _live_target_note(engine) -> str | None:
    target = engine.target
    if not target.is_gpu:
        return None
    try:
        preset = get_target(target.arch)
    except ValueError:
        preset = None
    if preset is not None and dataclasses.replace(target, name=preset.name) == preset:
        if preset.name in GOLDEN_TARGETS:
            return None   # the live target is the preset: its emission is the pinned one
        return f"live target {target.arch} has no golden (pinned: {', '.join(GOLDEN_TARGETS)})"
    return (f"live target {target.arch} differs from the {target.arch} preset "
            f"(device-reported sizes); its emission is not compared with the golden")


def replay(fixture: Fixture, engine=None) -> Result:
    """Recompute ``fixture``'s record and judge it against its golden.

    ``engine`` runs the numerics (default: the CPU engine). On a GPU engine the numerics
    are judged by the tolerance only and non-NHWC problems are skipped with a note; the
    preset emission (gfx942, sm_90) is compared on every backend, since it needs no device.
    Never raises for a loaded fixture: an exception becomes a ``failed`` result.
    """
    if engine is None:
        from .runtime import get_engine
        engine = get_engine("cpu")
    on_gpu = engine.target.is_gpu
    t0 = time.perf_counter()
    notes = []
    try:
        actual = compute(fixture.command, engine, perf_config=fixture.perf_config)
    except Exception as e:  # noqa: BLE001 - any error in the pipeline is this fixture's failure
        return Result(fixture, FAILED, failures=[f"{type(e).__name__}: {' '.join(str(e).split())}"],
                      seconds=time.perf_counter() - t0, engine=engine.name)
    dtype = dtype_of(fixture.command)
    drifts = compare(fixture.expect, actual, dtype=dtype, numerics="gpu" if on_gpu else "band")
    fails = failures(actual)
    for d in drifts:
        if d.kind == "numeric" and d.actual > d.expected and not fails:
            r = BAND_RATIO.get(dtype, 4.0)
            fails.append(f"numerics regressed: rms error {d.actual} is above the golden band "
                         f"({d.expected} x {r})")
    num = actual.get("numerics") or {}
    if on_gpu:
        if "skipped" in num:
            notes.append(f"numerics skipped on {engine.name}: {num['skipped']}")
        elif "rms_error" in num:
            notes.append(f"{engine.name} rms error {num['rms_error']} (tolerance {num['tolerance']})")
        live = _live_target_note(engine)
        if live:
            notes.append(live)
    status = FAILED if fails else DRIFTED if drifts else PASSED
    return Result(fixture, status, drifts, fails, notes, actual, time.perf_counter() - t0, engine.name)


def dtype_of(command: str) -> str:
    """The data type an MIOpenDriver line asks for, ``tf32`` for an fp32 line with TF32 math
    (``-M 0``; the numerics band's key), ``fp32`` when the line does not parse."""
    try:
        return parse(command).problem.compute_type
    except MiopenCommandError:
        return "fp32"


def only_hashes_moved(results) -> bool:
    """True when something drifted, nothing failed, and every drift is a ``*_sha256``
    field: the emitted text changed but no verdict, config, name or number did."""
    drifts = [d for r in results for d in r.drifts]
    return bool(drifts) and not any(r.failures for r in results) and all(d.kind == "hash" for d in drifts)


def only_kernel_body_moved(results) -> bool:
    """True when :func:`only_hashes_moved` and every drift is a ``source_sha256`` (the
    defines are unchanged): the edit is in the kernel source ``dgrad.cu`` itself."""
    return only_hashes_moved(results) and all(
        d.path.endswith("source_sha256") for r in results for d in r.drifts)


def moved_fields(results) -> list:
    """``[(path, fixtures), ...]``: how many fixtures each drifted field moved in, most
    first (ties by path), so a change meant for one class of kernels can be checked not to
    have moved another (``targets.sm_90.perf_config`` moved, ``targets.gfx942.*`` did not)."""
    counts = {}
    for r in results:
        for d in r.drifts:
            counts[d.path] = counts.get(d.path, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def new_golden(result: Result) -> dict:
    """The record :func:`update_golden` writes for a drifted result: the computed one,
    except that an rms error still inside the band keeps its golden value (so replaying
    on another BLAS build does not churn the file)."""
    new = json.loads(json_text(result.actual))
    old = (result.fixture.expect or {}).get("numerics") or {}
    num = new.get("numerics") or {}
    if ("rms_error" in old and "rms_error" in num and old.get("tolerance") == num.get("tolerance")
            and rms_in_band(old["rms_error"], num["rms_error"], num["tolerance"],
                            dtype_of(result.fixture.command))):
        num["rms_error"] = old["rms_error"]
    return new


def update_golden(results) -> tuple:
    """Write the new golden (:func:`new_golden`) of every drifted result into its file.

    Failed results are not written (their golden stays); passed ones are unchanged, so a
    golden moves only where something moved. Files are rewritten in canonical form, in
    their original record order.

    Returns:
        ``(updated, kept)``: lists of :class:`Result` written, and failed ones not written.

    Raises:
        ValueError: a result computed on a GPU engine (the golden numerics are CPU ones).
        FixtureError: a fixture file cannot be re-read or written.
    """
    gpu = sorted({r.engine for r in results if r.engine != "cpu"})
    if gpu:
        raise ValueError(f"the golden holds CPU numerics; results from {', '.join(gpu)} cannot be written")
    updated = [r for r in results if r.status == DRIFTED and r.actual is not None]
    kept = [r for r in results if r.status == FAILED]
    by_file = {}
    for r in updated:
        by_file.setdefault(r.fixture.path, {})[r.fixture.id] = new_golden(r)
    for path, new in by_file.items():
        current = load_file(path)
        write_file(path, [f.with_expect(new[f.id]) if f.id in new else f for f in current])
    return updated, kept


__all__ = ["BAND_FLOOR", "BAND_RATIO", "DRIFTED", "Drift", "ELEMENT_BUDGET", "FAILED", "FLOP_BUDGET",
           "Fixture", "FixtureError", "GOLDEN_TARGETS", "MAX_FILE_BYTES", "check_expect", "dtype_of",
           "NUMERIC_BATCH", "NUMERIC_SEED", "PASSED",
           "REGENERATE_COMMAND", "Result", "compare", "compute", "defines_sha256", "dumps",
           "failures", "fixture_files", "flatten", "load", "load_file", "moved_fields", "new_golden", "numerics_record",
           "only_hashes_moved", "only_kernel_body_moved", "replay", "rms_in_band", "round_sig",
           "select", "shrink", "target_record", "update_golden", "write_file"]
