"""Where a timing came from: the product, the host, the device and its runtime and compiler.

:func:`host_provenance` needs no device. :func:`device_provenance` opens the backend's
engine (a GPU context on a GPU backend), so callers run it in a process of its own pinned to
the GPU it describes (``python -m driver.campaign provenance BACKEND``), never in the driver.
Every value is plain data (JSON-ready); a version that cannot be read is ``None``.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version

PRODUCT = "miopen-dgrad-solver"


def product_version() -> str | None:
    """The installed package's version (None when it is run from a bare checkout)."""
    try:
        return version(PRODUCT)
    except PackageNotFoundError:
        return None


def now() -> str:
    """The current time, UTC, ISO 8601 with seconds (``2025-01-31T12:00:00+00:00``)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def visible_devices() -> str | None:
    """``$CUDA_VISIBLE_DEVICES``, else ``$HIP_VISIBLE_DEVICES`` (None when neither is set)."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", os.environ.get("HIP_VISIBLE_DEVICES"))


def host_provenance() -> dict:
    """The product and this host: versions of the product, Python and numpy, the OS, the
    host name and the date."""
    import numpy
    return {"product": PRODUCT, "product_version": product_version(), "python": platform.python_version(),
            "numpy": numpy.__version__, "platform": platform.platform(), "host": socket.gethostname(),
            "date": now()}


def _runtime_versions(engine) -> dict:
    """``runtime`` (driver/runtime version) and ``compiler`` (NVRTC/hiprtc) of a GPU engine."""
    rt = getattr(engine, "rt", None)
    out = {"runtime": None, "compiler": None}
    if rt is None:
        return out
    try:
        out["compiler"] = rt.compiler_id()
    except Exception:  # a version query must not fail a campaign
        pass
    try:
        if engine.name == "cuda":
            drv = rt._drv
            err, v = drv.cuDriverGetVersion()
            if err == drv.CUresult.CUDA_SUCCESS:
                out["runtime"] = f"cuda-driver-{v // 1000}.{(v % 1000) // 10}"
        elif engine.name == "hip":
            err, v = rt._hip.hipRuntimeGetVersion()
            out["runtime"] = f"hip-runtime-{v}"
    except Exception:
        pass
    return out


def device_provenance(backend: str) -> dict:
    """:func:`host_provenance` plus the device this process sees on ``backend``: its name,
    arch, compute-unit count, runtime and compiler versions, and the visible-device variable.

    Raises:
        RuntimeUnavailable: the backend's runtime or device is missing.
    """
    from .runtime import get_engine
    engine = get_engine(backend)
    rec = host_provenance()
    t = engine.target
    if engine.name == "cpu":
        import numpy
        rec.update(backend="cpu", device="cpu (numpy engine)", arch=t.arch, num_cus=os.cpu_count(),
                   runtime=f"numpy-{numpy.__version__}", compiler=None)
    else:
        rec.update(backend=engine.name, device=engine.rt.device_name(), arch=t.arch, num_cus=t.num_cus,
                   **_runtime_versions(engine))
    rec["visible_devices"] = visible_devices()
    rec["python_executable"] = sys.executable
    return rec


__all__ = ["PRODUCT", "device_provenance", "host_provenance", "now", "product_version", "visible_devices"]
