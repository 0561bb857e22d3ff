"""Start-up: queries pay for no heavy import, and a Ctrl-C while the driver loads is one
line and exit 130, not a traceback."""

from __future__ import annotations

import builtins
import subprocess
import sys

from conftest import ROOT

LINE = ("convfp16 -n 32 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NHWC --out_layout NHWC "
        "--fil_layout NHWC")


def _loaded_after(code: str) -> set:
    out = subprocess.run([sys.executable, "-c", code + "; import sys; print(' '.join(sorted(sys.modules)))"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def test_queries_do_not_import_ml_dtypes_or_a_gpu_runtime():
    """ml_dtypes' import alone is about a second of CPU on a busy machine; --help,
    applicable and config never need it (nor a vendor runtime)."""
    heavy = {"ml_dtypes", "cuda", "hip", "miopen_solver.runtime.cuda", "miopen_solver.runtime.hip"}
    for argv in (["--help"], ["applicable"] + LINE.split(), ["config"] + LINE.split() + ["--arch", "sm_90"]):
        mods = _loaded_after(f"import io, contextlib; from driver.entry import main; "
                             f"f = io.StringIO(); c = contextlib.redirect_stdout(f); c.__enter__(); "
                             f"main({argv!r})")
        assert not heavy & mods, (argv, heavy & mods)


def test_ctrl_c_while_loading_is_one_line(monkeypatch, capsys):
    from driver import entry
    real = builtins.__import__

    def interrupted(name, *a, **k):
        if name == "cli" or name.endswith("driver.cli"):
            raise KeyboardInterrupt
        return real(name, *a, **k)
    monkeypatch.delitem(sys.modules, "driver.cli", raising=False)
    monkeypatch.setattr(builtins, "__import__", interrupted)
    assert entry.main(["--help"]) == 130
    assert capsys.readouterr().err == "dgrad-driver: interrupted\n"
