"""MIOpenDriver's text formats for a backward-data run, plus our JSON record.

We print what MIOpenDriver 3.5 prints (ROCm/rocm-libraries ``projects/miopen/driver/conv_driver.hpp``
at commit ``07647551``, ``PrintBackwardDataTime``, ``RunBackwardDataGpuImmed``,
``AlgorithmSolutionToString``; ``driver/main.cpp`` and ``driver/sys_info.hpp`` for the
``Timestamp:`` line). What changed since the 2024 snapshot (ROCm/MIOpen ``2d1fd997``) that
research/miopen.md §1.7 describes:

* the stats header is ``stats: name, n, c, ho, wo, y, x, k, flopCnt, ...`` and the values
  follow it (``n, c, Ho, Wo, Y, X, K``), with ONE space before flopCnt. The 2024 driver
  printed the header ``... ho, wo, x, y, k ...`` over values ``n, c, Y, X, K, Ho, Wo`` and two
  spaces (MIOpen issue #1206); :func:`stats_lines` ``layout="2024"`` still prints that;
* with ``-t 1`` ``main.cpp`` prints ``RocmPerf::SysInfo`` right after the buffers are
  allocated (so after ``PRNG seed:``): ``Timestamp: <UTC>; Host Name: ...; Operating System:
  ...; ROCm: ...; MIOpen Driver: <major.minor.patch>; CPU Vendor: ...; CPU Model: ...; RAM
  Size: ... GB; GPU Model: ...; AMDGPU Driver: ...``;
* immediate mode (``-S``) prints ``MIOpen Backward Data Conv. Algorithm: <a>, Solution:
  <id>/<name>`` before the kernel time too (the 2024 driver printed it on the Find path only).

Strings unchanged since 2024:

* ``MIOpenDriver <argv>`` echo, ``PRNG seed: <seed>``;
* ``MIOpen Backward Data Conv. Algorithm: <a>, Solution: <id>/<name>`` (Find path), or in
  immediate mode (``-S``) ``Backward Data Conv solutions available: N`` and one
  ``- id: <id> algo: <algo>, time: <t> ms, ws: <bytes>, name: <SolverName>`` per solution;
* ``GPU Kernel Time Backward Data Conv. Elapsed: %f ms (average)`` with the average
  ``(total - first)/(iter - 1)`` taken in float32 like MIOpen's ``float`` arithmetic;
* the stats header and value line. The header says ``n, c, ho, wo, x, y, k`` but the values
  are printed as ``n, c, Y, X, K, Ho, Wo`` (confirmed by real output in MIOpen issue #1206;
  newer rocm-libraries reorders both). ``flopCnt = 2*N*C*Y*X*K*Ho*Wo/G``,
  ``bytesRead = N*C*K*sizeof + K*(C/G)*Y*X*sizeof`` (MIOpen's formula, which drops the
  spatial dims), ``bytesWritten = N*K*Ho*Wo*sizeof``; GFLOPs and GB/s divide a float32 count
  by the float32 time as C's usual conversions do;
* ``Wall-clock Time Backward Data Conv. Elapsed: <ms> ms, Auxiliary API calls: <ms> ms
  (GWSS: <ms>)`` and the verification lines, numbers in iostream's default format
  (``%g``, 6 significant digits).
"""

from __future__ import annotations

import os
import re

import numpy as np

from miopen_solver import SOLVER_ID, SOLVER_NAME
from miopen_solver.fileio import write_text
from miopen_solver.text import shorten

ALGORITHM_IMPLICIT_GEMM = 5
"""``miopenConvolutionBwdDataAlgoImplicitGEMM``."""

STATS_HEADER = ("stats: name, n, c, ho, wo, y, x, k, flopCnt, bytesRead, bytesWritten, GFLOPs, "
                "GB/s, timeMs")
"""MIOpenDriver 3.5's 2-D stats header (values in this order)."""
STATS_HEADER_2024 = ("stats: name, n, c, ho, wo, x, y, k, flopCnt, bytesRead, bytesWritten, GFLOPs, "
                     "GB/s, timeMs")
"""The 2024 driver's header, printed over values in the order ``n, c, Y, X, K, Ho, Wo``."""
STATS_LAYOUTS = ("3.5", "2024")

MIOPEN_DRIVER_VERSION = "3.5.1"
"""The MIOpenDriver whose output we print; the ``MIOpen Driver:`` field of the
``Timestamp:`` line."""


def cpp_float(x: float) -> str:
    """``std::cout << x`` with default formatting (``%g``, precision 6)."""
    return "%g" % float(x)


def echo_line(argv) -> str:
    """``MIOpenDriver <argv>``: the driver's echo of its command line."""
    return "MIOpenDriver " + " ".join(argv)


def seed_line(seed: int) -> str:
    """``PRNG seed: <seed>`` (MIOpen's driver/random.hpp)."""
    return f"PRNG seed: {seed}"


def algorithm_line(solution_id: int = SOLVER_ID, solver_name: str = SOLVER_NAME,
                   algorithm: int = ALGORITHM_IMPLICIT_GEMM) -> str:
    """``MIOpen Backward Data Conv. Algorithm: <a>, Solution: <id>/<name>`` (Find path)."""
    return f"MIOpen Backward Data Conv. Algorithm: {algorithm}, Solution: {solution_id}/{solver_name}"


def immediate_lines(time_ms: float | None, workspace_bytes: int = 0, solution_id: int = SOLVER_ID,
                    solver_name: str = SOLVER_NAME, algorithm: int = ALGORITHM_IMPLICIT_GEMM) -> list:
    """Immediate mode (``-S`` set): MIOpenDriver's ``RunBackwardDataGpuImmed`` lists the
    solutions ``...GetSolution`` reports before it runs the chosen one, in iostream format:
    ``Backward Data Conv solutions available: N`` and
    ``- id: <id> algo: <algo>, time: <t> ms, ws: <bytes>, name: <SolverName>``.
    Here the list is this solver's one solution; ``time`` is the perf-db's tuned time, or -1
    when none is recorded (the library reports no measured time then)."""
    t = -1.0 if time_ms is None else time_ms
    return ["Backward Data Conv solutions available: 1",
            f"- id: {solution_id} algo: {algorithm}, time: {cpp_float(t)} ms, ws: {workspace_bytes}, "
            f"name: {solver_name}"]


def miopen_average_ms(times_ms) -> float:
    """MIOpenDriver's ``ComputeAverageTime`` over per-iteration times, in float32:
    ``(total - first)/(iter - 1)`` when ``iter > 1``, else the first time."""
    t = np.asarray(times_ms, dtype=np.float32)
    if t.size == 0:
        raise ValueError("no timed iterations")
    total = np.float32(0)
    for v in t:  # sequential float accumulation, as the driver's loop does
        total = np.float32(total + v)
    if t.size > 1:
        return float(np.float32((total - t[0]) / np.float32(t.size - 1)))
    return float(t[0])


def kernel_time_line(avg_ms: float) -> str:
    """``GPU Kernel Time Backward Data Conv. Elapsed: %f ms (average)``."""
    return "GPU Kernel Time Backward Data Conv. Elapsed: %f ms (average)" % avg_ms


def stats_values(problem) -> dict:
    """MIOpen's counters for the stats line (bytes use the storage type's size)."""
    p = problem
    eb = p.elem_bytes
    return {
        "flop_count": p.flops,
        "bytes_read": p.N * p.C * p.K * eb + p.K * p.cpg * p.Y * p.X * eb,
        "bytes_written": p.N * p.K * p.Ho * p.Wo * eb,
    }


def _rate(count: int, avg_ms: float) -> float:
    """``size_t / float / 1e6`` in C: the count becomes a float, the quotient a float."""
    ms = np.float32(avg_ms)
    if ms == 0:
        return float("inf")
    return float(np.float32(np.float32(count) / ms)) / 1e6


def stats_lines(problem, avg_ms: float, layout: str = "3.5") -> list:
    """The two ``stats:`` lines of ``PrintBackwardDataTime`` (2-D).

    ``layout="3.5"`` (default): MIOpenDriver 3.5's header and value order (``n, c, ho, wo, y,
    x, k``, one space before flopCnt); ``"2024"``: the 2024 driver's (header ``ho, wo, x, y, k``
    over values ``Y, X, K, Ho, Wo``, two spaces)."""
    if layout not in STATS_LAYOUTS:
        raise ValueError(f"stats layout {layout!r}: allowed: {', '.join(STATS_LAYOUTS)}")
    p = problem
    v = stats_values(p)
    gflops = _rate(v["flop_count"], avg_ms)
    gbps = _rate(v["bytes_read"] + v["bytes_written"], avg_ms)
    tail = (v["flop_count"], v["bytes_read"], v["bytes_written"], gflops, gbps, avg_ms)
    if layout == "2024":
        value = ("stats: bwdd-conv%dx%du%d, %d, %d, %d, %d, %d, %d, %d,  %d, %d, %d, %.0f, %.0f, %f"
                 % ((p.Y, p.X, p.sH, p.N, p.C, p.Y, p.X, p.K, p.Ho, p.Wo) + tail))
        return [STATS_HEADER_2024, value]
    value = ("stats: bwdd-conv%dx%du%d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %.0f, %.0f, %f"
             % ((p.Y, p.X, p.sH, p.N, p.C, p.Ho, p.Wo, p.Y, p.X, p.K) + tail))
    return [STATS_HEADER, value]


STAMP_ENV = "SOURCE_DATE_EPOCH"
MAX_STAMP = 253402300799            # 9999-12-31 23:59:59 UTC, the last instant strftime's %Y shows


def stamp_time(environ=None) -> float | None:
    """The instant the ``Timestamp`` line shows, in seconds since 1970-01-01 UTC:
    ``SOURCE_DATE_EPOCH`` where set (the reproducible-builds.org convention, so two runs
    can print identical text), else None (now).

    Raises:
        ValueError: the variable is not a whole number of seconds in [0, MAX_STAMP].
    """
    env = os.environ if environ is None else environ
    raw = env.get(STAMP_ENV, "")
    if raw.strip() == "":
        return None
    text = raw.strip()
    allowed = f"allowed: whole seconds since 1970-01-01 UTC, 0 to {MAX_STAMP}"
    digits = text.lstrip("0") or "0"
    if not re.fullmatch(r"[0-9]+", text) or len(digits) > len(str(MAX_STAMP)) or int(digits) > MAX_STAMP:
        raise ValueError(f"{STAMP_ENV}={shorten(raw)!r}: {allowed}")
    return float(int(digits))


def sysinfo_line(device_name: str | None = None, now: float | None = None) -> str:
    """MIOpenDriver 3.5's ``-t 1`` system line (``RocmPerf::SysInfo::ShowSysInfo``).

    Fields we cannot know take MIOpen's own fallbacks: ``ROCm: 0.0.0`` (no HIP runtime
    answered), ``AMDGPU Driver: 0.0.0`` (no ``/sys/module/amdgpu/version``), ``GPU Model:
    None`` (no device); ``MIOpen Driver`` is :data:`MIOPEN_DRIVER_VERSION`."""
    import platform
    import socket
    import time as _time
    stamp = _time.strftime("%Y-%m-%d %H:%M:%S UTC", _time.gmtime(now))
    uname = platform.uname()
    vendor, model = _cpu_info()
    amdgpu = _read_first_line("/sys/module/amdgpu/version") or "0.0.0"
    gpu = f"1 x {device_name}" if device_name else "None"
    return (f"Timestamp: {stamp}; Host Name: {socket.gethostname()}; "
            f"Operating System: {uname.system} {uname.release}; ROCm: 0.0.0; "
            f"MIOpen Driver: {MIOPEN_DRIVER_VERSION}; CPU Vendor: {vendor}; CPU Model: {model}; "
            f"RAM Size: {_ram_gb()} GB; GPU Model: {gpu}; AMDGPU Driver: {amdgpu}")


def _read_first_line(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.readline().strip()
    except OSError:
        return ""


def _cpu_info(path: str = "/proc/cpuinfo") -> tuple:
    """(vendor, model) from /proc/cpuinfo as MIOpenDriver 3.5's SysInfo writes them: the vendor
    shortened to AMD, Intel or unknown; an AMD model cut to the two words after "AMD " (a
    missing second word leaves the trailing space); the model prefixed by ``"<sockets> x "``,
    the count of distinct ``physical id`` values, where the file has any."""
    vendor = model = ""
    sockets = set()
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                value = line.split(": ", 1)[1].rstrip("\n") if ": " in line else ""
                if line.startswith("vendor_id") and not vendor:
                    vendor = value
                elif line.startswith("model name") and not model:
                    model = value
                elif line.startswith("physical id"):
                    sockets.add(value)
    except OSError:
        pass
    if "AuthenticAMD" in vendor:
        vendor = "AMD"
        if "AMD " in model:
            model = model[model.index("AMD ") + 4:]
        words = model.split()
        model = f"{words[0] if words else ''} {words[1] if len(words) > 1 else ''}"
    elif "GenuineIntel" in vendor:
        vendor = "Intel"
    else:
        vendor = "unknown"
    return vendor, (f"{len(sockets)} x " if sockets else "") + model


def _ram_gb() -> int:
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal"):
                    return int(line.split()[1]) // (1024 * 1024)
    except (OSError, ValueError, IndexError):
        pass
    return 0


READ_FILE = "Read data from input file "
"""MIOpenDriver's line for a buffer read from ``-e`` or ``-D`` (``util_file.hpp``)."""


def read_file_line(path: str) -> str:
    """``Read data from input file PATH``: a ``-e``/``-D`` file read into its buffer."""
    return f"{READ_FILE}{path}"


def wall_line(wall_ms: float, auxiliary_ms: float, gwss_ms: float) -> str:
    """The ``-w 1`` wall-clock line (per-launch wall time, auxiliary calls, workspace query)."""
    return (f"Wall-clock Time Backward Data Conv. Elapsed: {cpp_float(wall_ms)} ms, "
            f"Auxiliary API calls: {cpp_float(auxiliary_ms)} ms (GWSS: {cpp_float(gwss_ms)})")


def wall_ignored_line(wall: int) -> str:
    """MIOpen's note for ``-w`` without ``-t 1``."""
    return f"Info: '--wall {wall}' is ignored because '--time' is not set"


def verify_line(verdict, reference: str = "CPU") -> str:
    """OK: ``... Verifies OK on CPU reference (err < tol)``; else ``... FAILED: err > tol``."""
    if verdict.ok:
        return (f"Backward Convolution Data Verifies OK on {reference} reference "
                f"({cpp_float(verdict.error)} < {cpp_float(verdict.tolerance)})")
    return f"Backward Convolution Data FAILED: {cpp_float(verdict.error)} > {cpp_float(verdict.tolerance)}"


def json_record(*, command, problem, solution, backend, seed, status: str, timing: dict | None = None,
                verdict=None, reference: str | None = None, failure: dict | None = None,
                compile_only: dict | None = None, verify_pid: int | None = None, immediate: bool = False,
                launches: int | None = None) -> dict:
    """One machine-readable record of a run (``dgrad-driver ... --json``).

    The solution's facts are those ``dgrad-driver config --json`` reports, from
    :class:`~miopen_solver.solver.Solution`: ``schedule`` (the kernel schedule's slug, config's
    ``spec.schedule``), ``kernel_name`` (with ``+transpose_<tensors>``
    when layout transforms run around the kernel), ``workspace_bytes`` (the solution's whole
    device workspace: the transforms' NHWC copies plus the kernel's own), ``notes``,
    ``layout_transforms``, ``split_n`` and ``split_k_reduce`` (``mode`` none/atomic/workspace,
    and for the workspace the reduction's kernel, launch and slices); ``config_source``,
    ``perfdb`` and ``tuned_ms`` say where the config came from.

    Args:
        solution: the :class:`~miopen_solver.solver.Solution` that ran.
        timing: a timing worker's record (``times_ms``, ``method``, ``wall_ms``, ...);
            the record adds MIOpen's average, the median and the min.
        verdict: a :class:`~miopen_solver.reference.Verdict` (or None: not verified).
        reference: ``"GPU"`` or ``"CPU"``, the reference the verdict is against.
        failure: the failed worker's result (``worker``, ``failure``, ``reason``,
            ``exit_code``, ``signal``...), when one failed.
        compile_only: the offline build's record of a compile-only run.
        verify_pid: the verification worker's process id.
        launches: the kernel launches the run made (warm-up, timed and verification
            launches; 1 for ``-t 0 -V 0``, which launches once untimed); None when nothing
            ran (compile-only).
        immediate: ``-S`` was given (MIOpen's immediate mode): the record says
            ``"mode": "immediate"`` and lists the solutions as the text output does
            (``id``, ``algo``, ``time_ms`` (the tuned time or -1), ``workspace_bytes``,
            ``name``); otherwise ``"mode": "find"`` and ``"solutions": null``.
    """
    spec = solution.spec
    tuned_ms = solution.tuned_ms
    facts = solution.as_dict()
    rec = {
        "command": command,
        "solver": SOLVER_NAME,
        "solution_id": SOLVER_ID,
        "algorithm": ALGORITHM_IMPLICIT_GEMM,
        "backend": backend,
        "arch": spec.target.arch,
        "problem_key": problem.problem_key(),
        "kernel_name": solution.kernel_name,
        "math": solution.math,
        "tolerance": solution.tolerance,
        "perf_config": spec.config.serialize(),
        "schedule": spec.schedule.slug,
        "config_source": solution.source,
        "perfdb": solution.perfdb_path,
        "tuned_ms": tuned_ms,
        "workspace_bytes": solution.workspace_bytes,
        "notes": list(solution.notes),
        "layout_transforms": facts["layout_transforms"],
        "split_n": facts["split_n"],
        "split_k": spec.split_k,
        "split_k_reduce": facts["split_k_reduce"],
        "lds_k_outer": spec.lds_k_outer,
        "seed": seed,
        "mode": "immediate" if immediate else "find",
        "solutions": ([{"id": SOLVER_ID, "algo": ALGORITHM_IMPLICIT_GEMM,
                        "time_ms": -1.0 if tuned_ms is None else tuned_ms,
                        "workspace_bytes": solution.workspace_bytes, "name": SOLVER_NAME}]
                      if immediate else None),
        "status": status,
        "timing": None,
        "stats": None,
        "verify": None,
        "failure": failure,
        "launches": launches,
    }
    if compile_only is not None:
        rec["compile_only"] = compile_only
    if verdict is not None:
        rec["verify"] = {**verdict.as_dict(), "reference": reference, "worker_pid": verify_pid}
    if timing is not None:
        import statistics
        t = list(timing["times_ms"])
        avg = miopen_average_ms(t)
        v = stats_values(problem)
        rec["timing"] = {"method": timing["method"], "average_ms": avg,
                         "median_ms": float(statistics.median(t)), "min_ms": float(min(t)),
                         "times_ms": t, "iterations": len(t), "warmup": timing.get("warmup", 0),
                         "wall_average_ms": timing.get("wall_ms"),
                         "compile_ms": timing.get("compile_ms", 0.0),
                         "cache_hit": timing.get("cache_hit", False), "worker_pid": timing.get("pid")}
        rec["stats"] = {**v, "gflops": _rate(v["flop_count"], avg),
                        "gbps": _rate(v["bytes_read"] + v["bytes_written"], avg)}
    return rec


# --------------------------------------------------------------------- tables and CSV
def format_table(header, rows) -> list:
    """Aligned text lines: numbers right-aligned, text left-aligned, two spaces between
    columns; None prints as ``-``. ``rows`` are sequences as long as ``header``."""
    def cell(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            return "%.6f" % v
        return str(v)
    cells = [[cell(v) for v in r] for r in rows]
    numeric = [all(isinstance(r[i], (int, float)) and not isinstance(r[i], bool) or r[i] is None
                   for r in rows) for i in range(len(header))]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(header)]

    def fmt(values):
        out = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)]
        return "  ".join(out).rstrip()
    return [fmt(list(header))] + [fmt(c) for c in cells]


def write_csv(path, fieldnames, rows) -> int:
    """Write dict ``rows`` to ``path`` as CSV with a header (None -> empty cell, floats
    with repr precision), whole or not at all (:func:`miopen_solver.fileio.write_text`);
    returns the number of rows written.

    Raises:
        FileError: the path is refused or the write failed (an old file is left as it was).
    """
    import csv
    import io
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=list(fieldnames), extrasaction="ignore")
    w.writeheader()
    n = 0
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in fieldnames})
        n += 1
    write_text(path, buf.getvalue())
    return n
