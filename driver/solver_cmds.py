"""``dgrad-driver applicable`` and ``dgrad-driver config``: ask the solver, no GPU needed.

Both take an MIOpenDriver line verbatim (``convfp16 -n 32 ... -F 2 ...``; a leading
``./bin/MIOpenDriver`` is ignored, and the whole line may also be one quoted argument).
Our own options are long-form and may stand before the line or anywhere after it, since
MIOpenDriver has no flag of the same name:

``--arch ARCH``         target preset (gfx90a, gfx942, gfx950, sm_80, sm_90, cpu); default gfx942
``--json``              one JSON object on stdout instead of text
``--perf-config STR``   (config) a serialised PerfConfig to resolve instead of the default
``--perfdb PATH``       (config) perf-db to look the problem up in (default: ``$MIOPEN_DGRAD_PERFDB``,
                        else MIOpen's user db directory); ``--no-perfdb`` skips the lookup
``--kouter``, ``--split-k``, ``--split-k-reduce``  (config) a run's settings, resolved as a run
                        resolves them

Exit status: 0 applicable / resolved; 1 not applicable; 2 bad input (unparsable line, unknown
or empty arch, a ``--perf-config`` that is malformed, has a field outside a 32-bit int or is
not valid for the problem on the target, settings that no config can take), with one line
``dgrad-driver: error: ...`` on stderr (``--json`` too) and nothing on stdout -- every
:class:`~miopen_solver.errors.PerfConfigError` exits 2, as in a run. An unusable perf-db (not
SQLite, a directory, another schema...) is one ``dgrad-driver: warning: ...`` line on stderr
and the default config is resolved.

What ``config`` reports is the solution's (:class:`~miopen_solver.solver.Solution`), as a
run's ``--json`` reports it: ``kernel_name`` (with ``+transpose_<tensors>`` when NCHW tensors
go through layout transforms), ``workspace_bytes`` (the whole device workspace: the
transforms' NHWC copies plus the kernel's own; ``launch.workspace_bytes`` is the same),
``layout_transforms``, ``notes`` and ``split_n``. ``spec`` is the NHWC kernel alone: its
``kernel_workspace_bytes`` is that kernel's own share of the workspace.

Direction policy: ``applicable`` parses with ``allow_any_direction`` so a ``-F 1`` line is
answered (not applicable, code ``DIRECTION``, exit 1) rather than refused; ``config`` needs a
backward-data line (``-F 2``) and refuses anything else as bad input (exit 2).
"""

from __future__ import annotations

import click

from miopen_solver import SOLVER_NAME
from miopen_solver.applicability import DIRECTION
from miopen_solver.command import check_supported, parse, split_command
from miopen_solver.config import PerfConfig
from miopen_solver.errors import MiopenCommandError, PerfConfigError
from miopen_solver.perfdb import default_path
from miopen_solver.solver import DgradSolver
from miopen_solver.target import get_target
from miopen_solver.text import cut_values, json_text

from .options import Command, UserError, arch_target, error_line, misplaced_option, perfdb_label, warn
from .run_cmd import (SPLIT_K_ALLOWED, check_kouter, check_solution, check_split_k, check_split_k_reduce, for_target,
                      perfdb_arch, with_note)

DEFAULT_ARCH = "gfx942"
DEFAULT_NVIDIA_ARCH = "sm_90"
"""The arch ``--backend cuda`` answers for without ``--arch`` (no device is opened here)."""
_SETTINGS = dict(ignore_unknown_options=True, allow_interspersed_args=False)
_VALUED = ("--arch", "--backend", "--perf-config", "--perfdb", "--kouter", "--split-k", "--split-k-reduce")
BACKENDS = ("auto", "cpu", "cuda", "hip")
"""``--backend`` values a run takes; ``config`` and ``applicable`` take them too, so a run's
line pastes as it is. Neither opens a device: ``config`` files its perf-db lookup under the
arch a run with that backend uses (``<arch>@cpu`` for a target simulated on the CPU engine,
:attr:`driver.run_cmd.Device.perfdb_arch`)."""
_SWITCHES = ("--json", "--no-perfdb")
_RUN_ONLY = ("--ref", "--warmup", "--timeout", "--print-name-only")
"""Options of a run that launches: a pasted run line carrying one is told so (nothing runs here)."""


class BadInput(Exception):
    """A user mistake: printed as one line on stderr, exit 2."""


def split_own_options(tokens) -> tuple:
    """Pull our long options out of an MIOpenDriver token list.

    Returns:
        ``(driver_tokens, options)`` with options keyed by name without dashes
        (``arch``, ``perf-config``, ``perfdb``, ``json``, ``no-perfdb``).

    Raises:
        BadInput: a valued option without its value.
    """
    tokens = list(tokens)
    if tokens and any(ch.isspace() for ch in tokens[0]):     # a quoted line, maybe with more flags after it
        try:
            tokens = split_command(tokens[0]) + tokens[1:]
        except MiopenCommandError as e:
            raise BadInput(str(e)) from None
    rest, opts = [], {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        name, eq, value = tok.partition("=")
        if name in _VALUED:
            if not eq:
                if i + 1 >= len(tokens):
                    raise BadInput(f"{name} needs a value; allowed: {name} VALUE (the value as the next token)")
                value = tokens[i + 1]
                i += 1
            opts[name[2:]] = value
        elif tok in _SWITCHES:
            opts[tok[2:]] = True
        elif name in _SWITCHES and eq:
            raise BadInput(f"{cut_values(tok)}: {name} takes no value; allowed: {name} alone")
        elif name in _RUN_ONLY:
            raise BadInput(f"{name}: an option of a run, and nothing is launched here; allowed: the line "
                           f"without it (or run the line: dgrad-driver <line> {name} ...)")
        else:
            rest.append(tok)
        i += 1
    return rest, opts


def _merge(opts: dict, **given) -> dict:
    """Options given before the line (click) overridden by those after it."""
    merged = {k: v for k, v in given.items() if v not in (None, False)}
    merged.update(opts)
    return merged


def _target(opts: dict):
    """The ``--arch`` target; without one, the ``cpu`` target a run with ``--backend cpu``
    runs (so the pasted run line is answered for what that run launches), with ``--backend
    cuda`` :data:`DEFAULT_NVIDIA_ARCH`, else :data:`DEFAULT_ARCH`. An ``--arch`` of the other
    vendor than ``--backend cuda``/``hip`` launches is bad input."""
    arch, backend = opts.get("arch"), opts.get("backend")
    if arch is None:
        return get_target("cpu" if backend == "cpu" else DEFAULT_NVIDIA_ARCH if backend == "cuda" else DEFAULT_ARCH)
    try:
        target = arch_target(arch)
    except UserError as e:
        raise BadInput(str(e)) from None
    vendor = {"cuda": "nvidia", "hip": "amd"}.get(backend)
    if vendor is not None and target.vendor != vendor:
        raise BadInput(f"--arch {arch} with --backend {backend}: a {backend} run launches on {vendor.upper()} "
                       f"targets only; allowed: an {vendor.upper()} --arch, --backend cpu (simulated), or no --backend")
    return target


def _perfdb_arch(opts: dict, target) -> str:
    """The arch a run with ``opts``' ``--backend`` reads perf-db records under, without
    opening a device (see :data:`BACKENDS`).

    Raises:
        BadInput: an unknown ``--backend``.
    """
    backend = opts.get("backend") or "auto"
    if backend not in BACKENDS:
        raise BadInput(f"--backend {cut_values(backend)!r}: allowed: {', '.join(BACKENDS)}")
    return perfdb_arch(target, backend)


def _parse_line(tokens, any_direction: bool):
    if not tokens:
        raise BadInput("missing the MIOpenDriver line (e.g. convfp16 -n 32 -c 64 ... -F 2)")
    try:
        cmd = parse(tokens, allow_any_direction=any_direction)
        check_supported(cmd)              # the flags a run refuses (-Z, -L, cast types, -G 1 -V 1)
        check_solution(cmd)               # -S names a solution: the same values a run takes
        return cmd
    except (MiopenCommandError, UserError) as e:
        ctx = click.get_current_context(silent=True)
        raise BadInput((misplaced_option(ctx, e) if ctx is not None else None) or str(e)) from None


def _fail(message: str) -> None:
    click.echo(error_line(message), err=True)
    raise SystemExit(2)


def _verdict_doc(problem, target, verdict, math_note: str | None = None) -> dict:
    """The ``applicable`` answer as data; ``math`` is the problem's compute type on the
    target (``tf32`` for a ``-M 0`` fp32 line where TF32 exists), ``math_note`` why a
    ``-M 0`` line runs IEEE fp32 there (None otherwise)."""
    return {"solver": SOLVER_NAME, "arch": target.arch, "problem_key": problem.problem_key(),
            "math": problem.compute_type, "math_note": math_note, **verdict.as_dict()}


def _verdict_text(doc: dict) -> str:
    state = "applicable" if doc["applicable"] else "not applicable"
    # a line asking for another direction: the key shown is its backward-data problem's
    other = any(r["code"] == DIRECTION for r in doc["reasons"])
    label = "problem key of its backward-data problem (-F 2)" if other else "problem key"
    lines = [f"{doc['solver']} on {doc['arch']}: {state}", f"{label}: {doc['problem_key']}"]
    if doc.get("math_note"):
        lines.append(f"note: {doc['math_note']}")
    lines += [f"  {r['code']}: {r['message']}" for r in doc["reasons"]]
    lines += [f"  note {n['code']}: {n['message']}" for n in doc["notes"]]
    return "\n".join(lines)


def _emit(doc: dict, as_json: bool, text: str) -> None:
    click.echo(json_text(doc, indent=2, sort_keys=True) if as_json else text)


@click.command("applicable", cls=Command, context_settings=_SETTINGS)
@click.option("--arch", default=None, help=f"Target arch preset (default {DEFAULT_ARCH}; {DEFAULT_NVIDIA_ARCH} with --backend cuda; cpu with --backend cpu, as a run).")
@click.option("--backend", default=None, help="As for a run (accepted so a run line pastes; no device is opened).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.argument("line", nargs=-1, type=click.UNPROCESSED)
def applicable_cmd(arch, backend, as_json, line):
    """Is an MIOpenDriver problem applicable? Prints every reason.

    Exit 0 applicable, 1 not applicable, 2 bad input.
    """
    try:
        tokens, opts = split_own_options(line)
        opts = _merge(opts, arch=arch, json=as_json, backend=backend)
        for name in ("perf-config", "perfdb", "no-perfdb", "kouter", "split-k", "split-k-reduce"):
            if name in opts:
                raise BadInput(f"--{name}: applicable answers for the problem, not a config; "
                               f"allowed here: --arch, --backend, --json (use 'config' to check a perf config)")
        target = _target(opts)
        _perfdb_arch(opts, target)                 # a bad --backend is bad input here too
        cmd = _parse_line(tokens, any_direction=True)
    except BadInput as e:
        _fail(str(e))
    cmd, math_note = for_target(cmd, target)       # -M 0 where there is no TF32: IEEE fp32, as a run
    verdict = DgradSolver().is_applicable(cmd.problem, target, forw=int(cmd.flags["forw"]))
    doc = _verdict_doc(cmd.problem, target, verdict, math_note)
    _emit(doc, bool(opts.get("json")), _verdict_text(doc))
    raise SystemExit(0 if verdict.ok else 1)


@click.command("config", cls=Command, context_settings=_SETTINGS)
@click.option("--arch", default=None, help=f"Target arch preset (default {DEFAULT_ARCH}; {DEFAULT_NVIDIA_ARCH} with --backend cuda; cpu with --backend cpu, as a run).")
@click.option("--perf-config", "perf_config", default=None,
              help="Serialised PerfConfig (tile_m,tile_n,...,stages[,schedule]) to resolve.")
@click.option("--backend", default=None,
              help="As for a run: the perf-db arch a run with it uses (cpu: <arch>@cpu); no device is opened.")
@click.option("--perfdb", default=None, help="Perf-db file to look the problem up in.")
@click.option("--no-perfdb", "no_perfdb", is_flag=True, help="Do not consult a perf-db.")
@click.option("--kouter", default=None, help="As for a run: auto, on or off (lds_k_outer).")
@click.option("--split-k", "split_k", default=None, help="As for a run: -1 (choose) or 1..64.")
@click.option("--split-k-reduce", "split_k_reduce", default=None, help="As for a run: auto, atomic, workspace or stream.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.argument("line", nargs=-1, type=click.UNPROCESSED)
def config_cmd(arch, backend, perf_config, perfdb, no_perfdb, kouter, split_k, split_k_reduce, as_json, line):
    """Resolve the kernel spec for an MIOpenDriver problem: the given config, the perf-db's
    or the default, with every derived value and the kernel name.

    Exit 0 resolved, 1 not applicable, 2 bad input (an invalid config or setting too).
    """
    try:
        tokens, opts = split_own_options(line)
        opts = _merge(opts, arch=arch, json=as_json, perfdb=perfdb, kouter=kouter, backend=backend,
                      **{"perf-config": perf_config, "no-perfdb": no_perfdb, "split-k": split_k,
                         "split-k-reduce": split_k_reduce})
        target = _target(opts)
        db_arch = _perfdb_arch(opts, target)
        cmd = _parse_line(tokens, any_direction=False)
        given = _given_config(opts)
        settings = _settings(opts)
    except BadInput as e:
        _fail(str(e))
    as_json = bool(opts.get("json"))
    cmd, math_note = for_target(cmd, target)       # -M 0 where there is no TF32: IEEE fp32, as a run
    solver, problem = DgradSolver(), cmd.problem
    verdict = solver.is_applicable(problem, target)
    if not verdict.ok:
        doc = _verdict_doc(problem, target, verdict, math_note)
        _emit(doc, as_json, _verdict_text(doc))
        raise SystemExit(1)
    db = None if opts.get("no-perfdb") or given is not None else \
        (opts["perfdb"] if opts.get("perfdb") is not None else default_path())     # "" as a run takes it
    try:
        typed = opts["perf-config"] if given is not None else None     # its errors quote it as typed
        solution = solver.find_solution(problem, target, perf_config=typed, perfdb=db, perfdb_arch=db_arch,
                                        perfdb_label=perfdb_label(opts.get("perfdb")), kouter=settings[0],
                                        split_k=settings[1], split_k_reduce=settings[2])   # as a run resolves it
    except PerfConfigError as e:    # the given config or settings are not valid here: bad input, as in a run
        _fail(f"{e} (on {target.arch})")
    shown_source = None
    if any(v is not None for v in settings):
        # the given, default or perf-db config with --kouter/--split-k/--split-k-reduce on top:
        # say so in the text where the settings changed it (the JSON "source" stays as it was)
        flags = " ".join(f"--{name} {value}" for name, value in zip(("kouter", "split-k", "split-k-reduce"), settings)
                         if value is not None)
        if solution.source == "perf-config":
            if given != solution.perf_config:
                shown_source = f"given, with {flags}"
        else:
            plain = solver.find_solution(problem, target, perfdb=db, perfdb_arch=db_arch,
                                         perfdb_label=perfdb_label(opts.get("perfdb")))
            if plain.perf_config != solution.perf_config:
                shown_source = f"{solution.source}, with {flags}"
    solution = with_note(solution, math_note)
    for text in solution.warnings:
        warn(text)
    spec = solution.spec
    source = "given" if solution.source == "perf-config" else solution.source
    notes = [n for n in solution.notes if not n.startswith("Using --perf-config")]
    facts = solution.as_dict()
    doc = {"solver": SOLVER_NAME, "arch": target.arch, "problem_key": problem.problem_key(),
           "valid": True, "source": source, "perf_config": solution.perf_config.serialize(), "notes": notes,
           "kernel_name": solution.kernel_name, "math": solution.math, "tolerance": solution.tolerance,
           "workspace_bytes": solution.workspace_bytes,
           "layout_transforms": facts["layout_transforms"], "spec": _spec_doc(spec),
           "launch": {**solution.kernels[0].as_dict(), "zero_fill": solution.zero_fill.as_dict(),
                      "workspace_bytes": solution.workspace_bytes},
           "split_k_reduce": facts["split_k_reduce"],
           "split_n": facts["split_n"]}
    _emit(doc, as_json, _config_text(doc, shown_source))


def _spec_doc(spec) -> dict:
    """``spec.as_dict()`` with the kernel's own workspace named ``kernel_workspace_bytes``:
    the spec is the NHWC kernel alone, and its workspace is not the solution's (which adds
    the layout transforms' NHWC copies; the top-level ``workspace_bytes``)."""
    doc = dict(spec.as_dict())
    if "workspace_bytes" in doc:
        doc["kernel_workspace_bytes"] = doc.pop("workspace_bytes")
    return doc


def _settings(opts: dict) -> tuple:
    """``(kouter, split_k, split_k_reduce)`` from ``--kouter``/``--split-k``/``--split-k-reduce``
    (None when not given).

    Raises:
        BadInput: a value a run would refuse, naming the option and what is allowed.
    """
    kouter, split, reduce = opts.get("kouter"), opts.get("split-k"), opts.get("split-k-reduce")
    try:
        check_kouter(kouter)
        check_split_k_reduce(reduce)
        if split is not None:
            try:
                split = int(split, 10)
            except ValueError:
                raise UserError(f"--split-k {split}: {SPLIT_K_ALLOWED}") from None
            check_split_k(split)
    except UserError as e:
        raise BadInput(str(e)) from None
    return kouter, split, reduce


def _given_config(opts: dict):
    """``--perf-config`` parsed, or None; a malformed one is BadInput naming the option."""
    if "perf-config" not in opts:
        return None
    try:
        return PerfConfig.parse(opts["perf-config"])
    except PerfConfigError as e:
        raise BadInput(f"--perf-config {opts['perf-config']!r}: {e}") from None



def spec_text(value) -> str:
    """A spec field for the human ``config`` output: a dict as ``key=value`` pairs (nested
    dicts in parentheses), a list as ``x``-joined numbers, None as ``-``; JSON keeps the data."""
    if value is None:
        return "-"
    if isinstance(value, dict):
        return " ".join(f"{k}={'(' + spec_text(v) + ')' if isinstance(v, dict) else spec_text(v)}"
                        for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return " x ".join(spec_text(v) for v in value)
    return str(value)

def _config_text(doc: dict, source: str | None = None) -> str:
    """``config``'s text form of ``doc``; ``source``: how the perf config line names where
    the config came from (default: ``doc["source"]``)."""
    launch = doc["launch"]
    lines = [f"kernel: {doc['kernel_name']}",
             f"solver: {doc['solver']} on {doc['arch']}",
             f"problem key: {doc['problem_key']}",
             f"perf config: {doc['perf_config']} ({source or doc['source']})",
             f"math: {doc['math']} (verification tolerance {doc['tolerance']:g})",
             *(f"note: {text}" for text in doc["notes"]),
             f"grid: {' x '.join(map(str, launch['grid']))}  block: {launch['block'][0]}  "
             f"zero-fill: {launch['zero_fill']['kind']}  workspace: {launch['workspace_bytes']} bytes"]
    red = doc["split_k_reduce"]
    if red["mode"] == "workspace":
        lines.append(f"split-K reduction: {red['kernel']}  grid: {' x '.join(map(str, red['grid']))}  "
                     f"block: {' x '.join(map(str, red['block']))}  {red['slices']} slices of {red['slice_bytes']} "
                     f"bytes at workspace offset {red['workspace_offset']}")
    lines += [f"  {k}: {spec_text(v)}" for k, v in doc["spec"].items() if k not in ("kernel_name", "problem_key")]
    return "\n".join(lines)


__all__ = ["applicable_cmd", "config_cmd", "split_own_options"]
