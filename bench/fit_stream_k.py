"""Fit the cost model's stream-K terms (``cost_model.STREAM_K_SCALE`` and ``STREAM_K_US``) to
H200 timings of stream-K configs, e.g.::

    python bench/fit_stream_k.py bench/results/2026-12-03_s19/sk_tiles_vecfixup.json \\
        bench/results/2026-12-03_s19/sk_default_256x128.json

Each input is a ``bench/time_configs.py --json`` file. The stream-K rows of modelled problems
are predicted by the shipped :data:`~miopen_solver.cost_model.H200` weights without the two
terms (``base``); ``measured ~= scale * base + us`` is fitted by least squares on the relative
error (every row weighs the same, whatever its size; a config timed in two files counts
twice). Prints the fit, its rms log error and the same for the data-parallel rows (the main
fit's own error, for comparison). A bad path, file or row is one line on stderr naming it,
exit 2.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from miopen_solver import cost_model as cm  # noqa: E402
from miopen_solver.command import parse  # noqa: E402
from miopen_solver.config import PerfConfig  # noqa: E402
from miopen_solver.errors import PerfConfigError  # noqa: E402
from miopen_solver.spec import make_spec  # noqa: E402
from miopen_solver.target import get_target  # noqa: E402


class BadInput(ValueError):
    """A file or row this script cannot read (one line, naming the file and the row)."""


def _row(path, i: int, r) -> tuple | None:
    """``(line, config, ours_ms)`` of row ``i`` of ``path``, None for an untimed row."""
    where = f"{path}: row {i}"
    if not isinstance(r, dict):
        raise BadInput(f"{where}: a JSON object expected (a time_configs.py --json row), got {type(r).__name__}")
    ms, line, config = r.get("ours_ms"), r.get("line"), r.get("config")
    if ms is None or config is None:            # a row the run could not time, or an error row
        return None
    if not isinstance(line, str) or not isinstance(config, str):
        raise BadInput(f"{where}: 'line' and 'config' must be strings")
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not (math.isfinite(ms) and ms > 0):
        raise BadInput(f"{where}: 'ours_ms' must be a finite number > 0, got {ms!r}")
    return line, config, float(ms)


def rows_of(paths) -> list:
    """``(measured_us, base_us, stream_k)`` of every timed row of a modelled problem.

    Raises:
        BadInput: a file is missing, unreadable, not a JSON list of objects, or a row's
            fields have the wrong types or a line does not parse.
    """
    target = get_target("sm_90a")
    base = dataclasses.replace(cm.H200, stream_k_scale=1.0, stream_k_us=0.0)
    out = []
    for path in paths:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as e:
            raise BadInput(f"{path}: cannot read: {e}") from None
        except ValueError as e:
            raise BadInput(f"{path}: not JSON: {e}") from None
        if not isinstance(data, list):
            raise BadInput(f"{path}: a JSON list of time_configs.py --json rows expected, got {type(data).__name__}")
        for i, r in enumerate(data):
            row = _row(path, i, r)
            if row is None:
                continue
            line, config, ms = row
            try:
                p = parse(line.split()).problem
            except ValueError as e:
                raise BadInput(f"{path}: row {i}: line: {e}") from None
            if not cm.modelled(p, target):
                continue
            try:
                spec = make_spec(p, target, PerfConfig.parse(config))
            except (PerfConfigError, ValueError):
                continue                        # a config the solver refuses here: not a timed kernel
            if spec.schedule not in cm.MODELLED:
                continue
            out.append((ms * 1e3, base.time_us(cm.features(spec)), bool(spec.stream_k)))
    return out


def rms_log(measured, predicted) -> float:
    e = np.log(np.asarray(measured) / np.asarray(predicted))
    return float(np.sqrt((e ** 2).mean()))


def main(argv=None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print("usage: fit_stream_k.py TIMES.json [...]", file=sys.stderr)
        return 2
    try:
        rows = rows_of(paths)
    except BadInput as e:
        print(f"fit_stream_k.py: {e}", file=sys.stderr)
        return 2
    sk = [(m, b) for m, b, s in rows if s]
    dp = [(m, b) for m, b, s in rows if not s]
    if len(sk) < 2:
        print(f"fit_stream_k.py: {len(sk)} stream-K rows of modelled problems; need at least 2", file=sys.stderr)
        return 2
    m = np.array([r[0] for r in sk])
    b = np.array([r[1] for r in sk])
    design = np.stack([b, np.ones_like(b)], 1) / m[:, None]
    (scale, us), *_ = np.linalg.lstsq(design, np.ones_like(m), rcond=None)
    print(f"stream-K rows: {len(sk)}; fit: measured = {scale:.3f} x base + {us:.2f} us")
    print(f"  rms log error: {rms_log(m, scale * b + us):.3f} fitted, {rms_log(m, b):.3f} without the terms "
          f"(geomean measured/base {math.exp(float(np.log(m / b).mean())):.3f})")
    if dp:
        print(f"data-parallel rows: {len(dp)}; rms log error of the main fit: "
              f"{rms_log([r[0] for r in dp], [r[1] for r in dp]):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
