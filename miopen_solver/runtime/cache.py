"""On-disk cache of compiled kernel binaries (cubin / AMD code object).

Key (Triton's discipline): sha256 over the full specialised source text (its defines
included), the target arch, the compiler's name and version, and the compile options.
Writes are atomic: a temporary file in the same directory, then ``os.replace``, so a
concurrent reader sees either nothing or the whole binary. A hit skips compilation.

Location: ``$MIOPEN_DGRAD_CACHE_DIR``, else ``$XDG_CACHE_HOME/miopen-dgrad/kernels``, else
``~/.cache/miopen-dgrad/kernels``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

ENV_VAR = "MIOPEN_DGRAD_CACHE_DIR"


def default_dir() -> Path:
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "miopen-dgrad" / "kernels"


def cache_key(text: str, arch: str, compiler: str, options) -> str:
    """sha256 hex of source text + arch + compiler id + options (NUL-separated)."""
    h = hashlib.sha256()
    for part in (text, arch, compiler, " ".join(options)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


class BinaryCache:
    """A directory of ``<key>.bin`` files (see module docstring)."""

    def __init__(self, directory: str | os.PathLike | None = None):
        self.dir = Path(directory) if directory else default_dir()

    def path(self, key: str) -> Path:
        return self.dir / f"{key}.bin"

    def get(self, key: str) -> bytes | None:
        try:
            return self.path(key).read_bytes()
        except FileNotFoundError:
            return None

    def put(self, key: str, data: bytes) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=self.dir)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path(key))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return self.path(key)
