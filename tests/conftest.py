"""Shared test helpers: small specs on the CPU target, random inputs, an independent oracle."""

from __future__ import annotations

import os
import signal
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, ROOT)
if os.path.join(ROOT, "tests") not in sys.path:  # test helpers (worker_faults, count_specs)
    sys.path.insert(0, os.path.join(ROOT, "tests"))

from miopen_solver import layouts  # noqa: E402
from miopen_solver.spec import PerfConfig, make_spec  # noqa: E402
from miopen_solver.target import get_target  # noqa: E402

settings.register_profile("default", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=150, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "default")

CPU_CONFIG = PerfConfig(stages=2)
"""A config valid on the ``cpu`` target for any problem (the cpu preset has no async copy)."""


@pytest.fixture
def timing_graph_flags(monkeypatch):
    """The ``graph`` argument of every timing job made from now on, in order (driver.workers'
    make_job spied on): how each config or line is timed."""
    from driver import workers
    seen = []
    real = workers.make_job

    def spy(role, **kw):
        if role == "timing":
            seen.append(kw.get("graph", False))
        return real(role, **kw)
    monkeypatch.setattr(workers, "make_job", spy)
    return seen


@pytest.fixture
def no_workers(monkeypatch):
    """Fail the test when any worker process would start."""
    from driver import workers

    def no(*a, **k):
        raise AssertionError("a worker was started")
    monkeypatch.setattr(workers.Worker, "start", no)


def draw_problem(data, *, dtype: str = "fp32", tf32: bool = False, layout: str = "NHWC", channels: int = 40,
                 filt: int = 7, stride: int = 4, dilation: int = 3, pad: int = 3, size: int = 20):
    """A random 2-D problem from hypothesis ``data`` (groups 1-4, odd channel counts, strides,
    dilations, pads, all tensors in ``layout``), or None when the draw is not a valid problem
    (the filter does not fit the padded input)."""
    from miopen_solver.problem import ConvProblem
    G = data.draw(st.sampled_from([1, 1, 1, 2, 3, 4]))
    cpg, kpg = data.draw(st.integers(1, channels)), data.draw(st.integers(1, channels))
    Y, X = data.draw(st.integers(1, filt)), data.draw(st.integers(1, filt))
    sH, sW = data.draw(st.integers(1, stride)), data.draw(st.integers(1, stride))
    dH, dW = data.draw(st.integers(1, dilation)), data.draw(st.integers(1, dilation))
    pH, pW = data.draw(st.integers(0, pad)), data.draw(st.integers(0, pad))
    Hi, Wi = data.draw(st.integers(1, size)), data.draw(st.integers(1, size))
    try:
        return ConvProblem(N=data.draw(st.integers(1, 3)), C=G * cpg, Hi=Hi, Wi=Wi, K=G * kpg, Y=Y, X=X, pH=pH,
                           pW=pW, sH=sH, sW=sW, dH=dH, dW=dW, G=G, dtype=dtype, in_layout=layout,
                           out_layout=layout, fil_layout=layout, tf32=tf32)
    except ValueError:
        return None


def run_cli(capsys, *args):
    """``dgrad-driver *args`` in this process: ``(status, stdout lines, stderr lines)``."""
    from driver.cli import main
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out.splitlines(), err.splitlines()


def refused_in_one_line(capsys, main, argv, prog: str) -> str:
    """``main(argv)`` of a bench script refused bad input as the project asks: exit 2
    (returned, or argparse's SystemExit), nothing on stdout, one stderr line starting
    ``<prog>: ``, no traceback. Returns the line."""
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"{prog}: ") and "Traceback" not in err
    return err


def suite_lines():
    """``(label, MIOpenDriver line)`` for every line of bench/suite.txt, in file order."""
    with open(os.path.join(ROOT, "bench", "suite.txt")) as fh:
        for raw in fh:
            if raw.strip() and not raw.startswith("#"):
                line, _, label = raw.partition("#")
                yield label.strip(), line.strip()


PATCH_LINES = [
    "convfp16 -n 64 -c 3 -H 224 -W 224 -k 768 -y 16 -x 16 -u 16 -v 16",      # ViT-B/16
    "convbfp16 -n 32 -c 3 -H 224 -W 224 -k 1024 -y 14 -x 14 -u 14 -v 14",    # ViT-L/14
    "convbfp16 -n 32 -c 3 -H 226 -W 224 -k 96 -y 4 -x 4 -u 4 -v 4",          # ConvNeXt stem, a border row
    "conv -n 32 -c 96 -H 57 -W 56 -k 192 -y 2 -x 2 -u 2 -v 2",               # downsampling, a border row
    "convfp16 -n 64 -c 384 -H 14 -W 14 -k 768 -y 2 -x 2 -u 2 -v 2",
    "convfp16 -n 8 -c 384 -H 28 -W 28 -k 768 -y 2 -x 2 -u 2 -v 2 -g 2",      # grouped
]
"""Patch embeddings (stride = filter, no padding) whose default kernels the compile tests build."""
NCHW_PW_LINES = [
    "convfp16 -n 32 -c 64 -H 56 -W 56 -k 256 -y 1 -x 1",
    "convbfp16 -n 32 -c 256 -H 56 -W 56 -k 64 -y 1 -x 1",
    "convfp16 -n 32 -c 1024 -H 14 -W 14 -k 256 -y 1 -x 1",
    "convfp16 -n 32 -c 2048 -H 7 -W 8 -k 512 -y 1 -x 1",        # P = 56: 8-element pixel vectors
    "conv -n 8 -c 33 -H 7 -W 8 -k 17 -y 1 -x 1",                 # odd channels, fp32
    "convbfp16 -n 4 -c 96 -H 14 -W 14 -k 192 -y 1 -x 1 -g 3",    # groups
    "convfp16 -n 64 -c 3 -H 224 -W 224 -k 768 -y 16 -x 16 -u 16 -v 16",     # patch filters: ViT-B/16
    "convbfp16 -n 64 -c 3 -H 224 -W 224 -k 96 -y 4 -x 4 -u 4 -v 4",         # ConvNeXt stem
    "convfp16 -n 8 -c 96 -H 56 -W 56 -k 192 -y 2 -x 2 -u 2 -v 2 -g 2",      # downsampling, grouped
]
"""All-NCHW 1x1 and patch-filter lines whose default kernels (the nchw-pointwise GEMMs) the
compile tests build."""
FAMILY_LINES = ([("patch_gemm", f"{line} -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC")
                 for line in PATCH_LINES] + [("nchw_pw", f"{line} -F 2") for line in NCHW_PW_LINES])
"""``(kernel name part, full line)`` of the virtual-GEMM families' compile-test lines."""


def cpu_spec(problem, **config):
    """A DgradSpec for ``problem`` on the cpu target (``config`` overrides PerfConfig fields)."""
    return make_spec(problem, get_target("cpu"), CPU_CONFIG.replace(**config))


def random_inputs(problem, seed=0, low=-1.0, high=1.0):
    """dY and W in the problem's layouts and storage type, uniform in [low, high)."""
    rng = np.random.default_rng(seed)
    st = layouts.storage_dtype(problem.dtype)
    dy = rng.uniform(low, high, layouts.dy_shape(problem)).astype(st)
    w = rng.uniform(low, high, layouts.w_shape(problem)).astype(st)
    return dy, w


def naive_dgrad(problem, dy, w):
    """dX by the textbook gather definition (research dgrad_kernels.md §1), pure Python
    loops over every (n, hi, wi, c, k, y, x) -- for tiny problems only. Returns float64 NHWC.

    ``ho = (hi + pH - y*dH) / sH`` counts only when the division is exact and in range."""
    p = problem
    dy_n = layouts.dy_to_nhwc(p, dy).astype(np.float64)
    w_n = layouts.w_to_kyxc(p, w).astype(np.float64)
    dx = np.zeros((p.N, p.Hi, p.Wi, p.C))
    for n in range(p.N):
        for hi in range(p.Hi):
            for wi in range(p.Wi):
                for g in range(p.G):
                    for c in range(p.cpg):
                        acc = 0.0
                        for y in range(p.Y):
                            th = hi + p.pH - y * p.dH
                            if th % p.sH or not 0 <= th // p.sH < p.Ho:
                                continue
                            for x in range(p.X):
                                tw = wi + p.pW - x * p.dW
                                if tw % p.sW or not 0 <= tw // p.sW < p.Wo:
                                    continue
                                for k in range(p.kpg):
                                    acc += (dy_n[n, th // p.sH, tw // p.sW, g * p.kpg + k]
                                            * w_n[g * p.kpg + k, y, x, c])
                        dx[n, hi, wi, g * p.cpg + c] = acc
    return dx


def count_calls(fn):
    """``(fn(), number of Python and C function calls it made)``: a measure of work that
    does not depend on the machine's speed or load (tests of "work bounded by the problem's
    size" compare these counts, never the clock)."""
    n = 0

    def profile(frame, event, arg):
        nonlocal n
        if event in ("call", "c_call"):
            n += 1

    sys.setprofile(profile)
    try:
        result = fn()
    finally:
        sys.setprofile(None)
    return result, n


@pytest.fixture
def no_seed_env(monkeypatch):
    monkeypatch.delenv("MIOPEN_DEBUG_DRIVER_PRNG_SEED", raising=False)


PINNED_STAMP = "1764547200"             # 2025-12-01 00:00:00 UTC


@pytest.fixture(autouse=True)
def _pinned_timestamp(monkeypatch):
    """Every run a test makes (in process or in a subprocess) prints the same ``Timestamp``
    line, so two runs' text can be compared whatever the wall clock did between them."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", PINNED_STAMP)


@pytest.fixture(autouse=True)
def _user_db_dir(monkeypatch, tmp_path_factory):
    """No test reads or writes the real MIOpen user db dir (the default perf-db's home)."""
    if not os.environ.get("MIOPEN_USER_DB_PATH"):
        monkeypatch.setenv("MIOPEN_USER_DB_PATH", str(tmp_path_factory.mktemp("udb")))


def pytest_configure(config):
    """A test run started with SIGINT ignored (a background job of a non-interactive shell,
    nohup) hands that to every process it starts, and the Ctrl-C tests then test nothing but
    the inheritance: give the pytest process Python's own handler (an exec resets a handler,
    not an ignore, so its children start with SIGINT at its default). A normal start already
    has it. A hook, not import-time code: a pool process that imports this module to unpickle
    a test's function has ignored SIGINT on purpose."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
