"""Static checks over every Python file of the project (pyflakes).

Much of the tree runs only where this machine cannot: ``tests/test_gpu*.py`` and the
``bench/`` scripts run on the GPU host, the HIP runtime only on AMD hardware. A name that is
not defined there (a missing import, a typo) is found here, on the CPU, in CI, instead of on
the device after a paid machine start. Every pyflakes message fails the test -- unused
imports and variables as well, so that the check stays quiet enough to be read.
"""
from __future__ import annotations

from pathlib import Path

import pytest

pyflakes_api = pytest.importorskip("pyflakes.api")
from pyflakes import reporter as pyflakes_reporter  # noqa: E402  (after the importorskip)

ROOT = Path(__file__).resolve().parents[1]
TREES = ("miopen_solver", "driver", "tests", "bench")


class _Collect(pyflakes_reporter.Reporter):
    def __init__(self):
        self.messages: list[str] = []

    def unexpectedError(self, filename, msg):
        self.messages.append(f"{filename}: {msg}")

    def syntaxError(self, filename, msg, lineno, offset, text):
        self.messages.append(f"{filename}:{lineno}: syntax error: {msg}")

    def flake(self, message):
        self.messages.append(str(message))


def _python_files():
    files = sorted(p for t in TREES for p in (ROOT / t).rglob("*.py") if "__pycache__" not in p.parts)
    assert len(files) > 50, f"found only {len(files)} Python files under {TREES}"
    return files


def test_pyflakes_finds_nothing_in_the_project():
    rep = _Collect()
    for path in _python_files():
        pyflakes_api.checkPath(str(path), rep)
    assert not rep.messages, "pyflakes:\n" + "\n".join(rep.messages)


@pytest.mark.parametrize("source, kind", [
    ("def f():\n    return default_performance_config(1)\n", "undefined name"),
    ("import os\n", "imported but unused"),
    ("def f(x):\n    y = x\n    return x\n", "assigned to but never used"),
])
def test_the_check_reports_each_kind_it_guards(tmp_path, source, kind):
    """The check is live: the kinds of fault it exists for are reported (a GPU-only test calling a
    function it never imported was the fault that showed the need)."""
    bad = tmp_path / "bad.py"
    bad.write_text(source)
    rep = _Collect()
    pyflakes_api.checkPath(str(bad), rep)
    assert any(kind in m for m in rep.messages), rep.messages


def _handlers_naming_names_imported_in_their_try(source: str) -> list:
    """``(line, name)`` of each except clause that names a class the same ``try`` imports: an
    interrupt or failure before that import leaves the name unbound, and the except clause
    itself raises (a Ctrl-C in a campaign's start-up was an UnboundLocalError traceback)."""
    import ast
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Try):
            continue
        imported = {a.asname or a.name.split(".")[0] for stmt in node.body for sub in ast.walk(stmt)
                    if isinstance(sub, (ast.Import, ast.ImportFrom)) for a in sub.names}
        for handler in node.handlers:
            for sub in ast.walk(handler.type) if handler.type is not None else ():
                if isinstance(sub, ast.Name) and sub.id in imported:
                    out.append((handler.lineno, sub.id))
    return out


def test_no_except_clause_names_what_its_try_imports():
    found = [f"{p.relative_to(ROOT)}:{line}: {name}" for p in _python_files()
             for line, name in _handlers_naming_names_imported_in_their_try(p.read_text())]
    assert not found, "except clauses naming a class imported in their own try:\n" + "\n".join(found)
    bad = "try:\n    from importlib.metadata import PackageNotFoundError, version\nexcept PackageNotFoundError:\n    pass\n"
    assert _handlers_naming_names_imported_in_their_try(bad) == [(3, "PackageNotFoundError")]
