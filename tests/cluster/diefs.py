"""A real local fsspec filesystem whose process dies once, mid-way (for the retry tests).

`DieOnceFS` is `LocalFileSystem` under the protocol `dieonce://`. The first process that reads
past the middle of a trace file (`die_on="read"`), or writes a cache entry's `columns.npz`
(`die_on="write"`: half the bytes are written first), creates a marker file in
`$DIEONCE_MARKER_DIR` and exits at once with `os._exit`, as a killed or out-of-memory worker
does; later attempts find the marker and go through. Ray workers import this module when they
unpickle a `FileRef` holding the filesystem, which registers the protocol there too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

MARKER_ENV = "DIEONCE_MARKER_DIR"


class DieOnceFS(LocalFileSystem):
    protocol = ("dieonce", "file")

    def __init__(self, die_on: str = "write", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.die_on = die_on

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        text = str(path)
        if text.startswith("dieonce://"):
            text = text[len("dieonce://"):]
        return super()._strip_protocol(text)

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        handle = super()._open(path, mode, **kwargs)
        if self.die_on == "read" and "r" in mode:
            return _DyingReader(handle, self.size(path))
        return handle

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        if self.die_on == "write" and str(path).endswith("columns.npz") and _first("write"):
            with open(self._strip_protocol(path), "wb") as handle:
                handle.write(value[: len(value) // 2])
            os._exit(17)
        super().pipe_file(path, value, mode=mode, **kwargs)


class _DyingReader:
    def __init__(self, handle: Any, size: int) -> None:
        self._handle, self._half = handle, size // 2

    def read(self, size: int = -1) -> bytes:
        if self._handle.tell() >= self._half and _first("read"):
            os._exit(17)
        return self._handle.read(size if size < 0 else min(size, self._half or size))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    def __enter__(self) -> _DyingReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._handle.close()


def _first(what: str) -> bool:
    """True for the first caller across processes (the marker file is created exclusively)."""
    marker = Path(os.environ[MARKER_ENV]) / f"killed-{what}"
    try:
        with open(marker, "x") as handle:
            handle.write(str(os.getpid()))
        return True
    except FileExistsError:
        return False


fsspec.register_implementation("dieonce", DieOnceFS, clobber=True)
