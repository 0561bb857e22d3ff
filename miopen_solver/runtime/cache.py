"""On-disk cache of compiled kernel binaries (cubin / AMD code object).

Key (Triton's discipline): sha256 over the full specialised source text (its defines
included), the target arch, the compiler's name and version, and the compile options.
A hit skips compilation.

Entries: ``<key>.bin`` holds a header -- :data:`MAGIC`, the payload's length and its
sha256 -- then the payload. :meth:`BinaryCache.get` checks all three, so a truncated entry
(a full disk, a killed copy), garbage or an entry of an older format is never handed to a
loader: it is deleted and reported as a miss, and the kernel is compiled and stored again.
Writes are atomic (:func:`miopen_solver.fileio.write_bytes`: a temporary file beside the
entry, fsync, ``os.replace``), so a concurrent reader sees either nothing or a whole
entry.

The cache never fails a build: a directory that cannot be created or written turns the
cache off (every lookup misses, nothing is stored), a store that fails is skipped, and
:attr:`BinaryCache.warnings` says so, as data for the caller to show. Temporary files of
writes that were killed (``.<key>.bin.<random>.tmp``) older than :data:`STALE_TMP_S` are
removed when the cache is opened.

Location: ``$MIOPEN_DGRAD_CACHE_DIR``, else ``$MIOPEN_CUSTOM_CACHE_DIR/miopen-dgrad`` (MIOpen's
kernel cache directory variable, ``~`` expanded; our entries in their own subdirectory), else
``$XDG_CACHE_HOME/miopen-dgrad/kernels``, else ``~/.cache/miopen-dgrad/kernels``.
``MIOPEN_DISABLE_CACHE`` set to 1/yes/true/on/enable(d) turns the cache off (every lookup
misses, nothing is stored), as it turns MIOpen's off.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import struct
import tempfile
import time
from pathlib import Path

from ..errors import FileError
from ..fileio import TEMP_SUFFIX, read_bytes, write_bytes

ENV_VAR = "MIOPEN_DGRAD_CACHE_DIR"
MAGIC = b"DGKCACH1"
"""The first bytes of every entry (format version 1)."""
_HEADER = struct.Struct("<8sQ32s")   # magic, payload length, sha256 of the payload
MAX_ENTRY_BYTES = 512 << 20
"""The largest payload read back (code objects are KiBs to a few MiB)."""
STALE_TMP_S = 3600.0
"""Temporary files older than this (seconds) are left-overs of killed writes."""


CUSTOM_ENV = "MIOPEN_CUSTOM_CACHE_DIR"
DISABLE_ENV = "MIOPEN_DISABLE_CACHE"


def disabled() -> bool:
    """``MIOPEN_DISABLE_CACHE`` is set to a true value."""
    return os.environ.get(DISABLE_ENV, "").strip().lower() in ("1", "yes", "true", "on", "enable", "enabled")


def default_dir() -> Path:
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    if os.environ.get(CUSTOM_ENV, "").strip():
        return Path(os.environ[CUSTOM_ENV]).expanduser() / "miopen-dgrad"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "miopen-dgrad" / "kernels"


def cache_key(text: str, arch: str, compiler: str, options) -> str:
    """sha256 hex of source text + arch + compiler id + options (NUL-separated)."""
    h = hashlib.sha256()
    for part in (text, arch, compiler, " ".join(options)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def pack_entry(data: bytes) -> bytes:
    """An entry's bytes: header (magic, length, sha256) + ``data``."""
    return _HEADER.pack(MAGIC, len(data), hashlib.sha256(data).digest()) + data


def unpack_entry(raw: bytes) -> tuple:
    """``(payload, None)`` for a whole entry, else ``(None, why)``."""
    if len(raw) < _HEADER.size:
        return None, f"truncated: {len(raw)} bytes, less than its {_HEADER.size}-byte header"
    magic, length, digest = _HEADER.unpack_from(raw)
    if magic != MAGIC:
        return None, "not a kernel cache entry (no header)"
    data = raw[_HEADER.size:]
    if len(data) != length:
        return None, f"truncated: {len(data)} of {length} bytes"
    if hashlib.sha256(data).digest() != digest:
        return None, "its sha256 does not match its contents"
    return data, None


class BinaryCache:
    """A directory of ``<key>.bin`` entries (see module docstring).

    Attributes:
        dir: the directory.
        enabled: False when the directory cannot be used (lookups miss, nothing is stored).
        warnings: what went wrong so far (an unusable directory, a bad entry removed, a
            store that failed), one sentence each, in order, without repeats.
    """

    def __init__(self, directory: str | os.PathLike | None = None):
        self.dir = Path(directory) if directory else default_dir()
        self.warnings = []
        self.enabled = False if disabled() else self._open()

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    def _open(self) -> bool:
        try:
            if self.dir.exists() and not self.dir.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "not a directory")
            self.dir.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=self.dir):
                pass
        except OSError as e:
            self._warn(f"kernel cache {self.dir} is unusable ({e.strerror or e}); compiling without a cache")
            return False
        self.remove_stale()
        return True

    def remove_stale(self, max_age_s: float = STALE_TMP_S) -> list:
        """Delete temporary files of killed writes older than ``max_age_s``; their names."""
        cutoff = time.time() - max_age_s
        removed = []
        try:
            entries = list(os.scandir(self.dir))
        except OSError:
            return removed
        for entry in entries:
            if not (entry.name.startswith(".") and entry.name.endswith(TEMP_SUFFIX)):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) and st.st_mtime < cutoff:
                    os.unlink(entry.path)
                    removed.append(entry.name)
            except OSError:
                pass
        return removed

    def path(self, key: str) -> Path:
        return self.dir / f"{key}.bin"

    def get(self, key: str) -> bytes | None:
        """The stored binary, or None: a miss, the cache off, or an entry that fails its
        check (then deleted, with a warning)."""
        if not self.enabled:
            return None
        p = self.path(key)
        try:
            data, why = unpack_entry(read_bytes(p, MAX_ENTRY_BYTES + _HEADER.size, "kernel cache entry"))
        except FileError as e:
            if e.errno == errno.ENOENT:
                return None
            data, why = None, e.reason
        if why is None:
            return data
        self._warn(f"kernel cache entry {p} is unusable ({why}); removed, the kernel is compiled again")
        try:
            os.unlink(p)
        except OSError:
            pass
        return None

    def put(self, key: str, data: bytes) -> Path | None:
        """Store ``data`` under ``key``; the entry's path, or None when the cache is off or
        the store failed (a warning; the caller goes on with its binary)."""
        if not self.enabled:
            return None
        p = self.path(key)
        try:
            write_bytes(p, pack_entry(data))
        except FileError as e:
            self._warn(f"kernel cache entry {p} not stored ({e.reason})")
            return None
        return p
