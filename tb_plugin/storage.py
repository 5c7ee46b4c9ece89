"""All file access goes through fsspec: local paths and s3://, gs://, az://, hdfs://, memory://.

The cloud backends are optional extras (`pip install torch-prof[s3]` etc.); fsspec raises a
clear ImportError naming the missing package when one is needed.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import fsspec
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from .compression import GZIP_MAGIC, decompressor
from .settings import SERVE_OUTSIDE_ENV

CHUNK_SIZE = 2 << 20  # bytes read and decompressed at a time: small batches, small peaks


@dataclass(frozen=True)
class FileRef:
    """A file on some filesystem, with the identity used for caching."""

    fs: Any
    path: str
    size: int
    mtime: str  # modification time or ETag, as the filesystem reports it
    #: Real path of the local logdir the file was found under ("" = unknown, or not local):
    #: `open_to_serve` serves nothing from outside it.
    root: str = field(default="", compare=False)
    #: The user allowed serving files whose real path is outside `root`
    #: (`Settings.serve_outside_logdir`, passed to discovery by the entry point).
    serve_outside: bool = field(default=False, compare=False)

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)

    @property
    def url(self) -> str:
        return self.fs.unstrip_protocol(self.path)

    def identity(self) -> str:
        return f"{self.url}|{self.size}|{self.mtime}"

    def open(self) -> BinaryIO:
        return open_file(self.fs, self.path)


class NotRegularFile(OSError):
    """A FIFO, device or socket where a file was expected: never read (it may never end)."""


class TooLarge(OSError):
    """A file bigger than the limit of what is read of it whole."""


class OutsideLogdir(PermissionError):
    """The file's real path is outside the logdir and serving it was not allowed."""


def is_local(fs: Any) -> bool:
    return isinstance(fs, LocalFileSystem)


def open_file(fs: Any, path: str) -> BinaryIO:
    """Open for reading; a local path must be a regular file. The open itself never blocks
    (O_NONBLOCK, dropped once the file is known to be regular): opening a FIFO would wait for
    a writer forever. Only fsspec's own local filesystem is opened directly; anything else,
    a LocalFileSystem subclass included, goes through its `open`."""
    if type(fs) is not LocalFileSystem:  # noqa: E721 - a subclass may wrap its reads: honour them
        return fs.open(path, "rb")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(f"{path} is not a regular file (a FIFO, device or socket)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bounded(fs: Any, path: str, limit: int) -> bytes:
    """The whole file, for files that are read whole (cache entries, markers): opened as
    `open_file` opens it (a FIFO, device or socket is refused without blocking), and never
    more than `limit` bytes read: a bigger file raises `TooLarge` (before reading, when its
    size is known)."""
    with open_file(fs, path) as handle:
        size = _known_size(handle)
        if size is not None and size > limit:
            raise TooLarge(f"{path} is {size} bytes, over the {limit}-byte limit")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"{path} is over the {limit}-byte limit")
    return data


def _known_size(handle: Any) -> int | None:
    with contextlib.suppress(AttributeError, OSError, ValueError):
        return os.fstat(handle.fileno()).st_size
    size = getattr(handle, "size", None)
    return size if isinstance(size, int) else None


def open_to_serve(ref: FileRef) -> BinaryIO:
    """Open a file whose bytes are sent as they are (`/trace/download`): a regular file, and
    (local) only when its real path, symlinks resolved at open time, is inside the logdir,
    unless the ref says the user allowed it (`FileRef.serve_outside`)."""
    handle = ref.open()
    if not ref.root or not is_local(ref.fs) or ref.serve_outside:
        return handle
    real = os.path.realpath(f"/proc/self/fd/{handle.fileno()}") \
        if os.path.isdir("/proc/self/fd") else os.path.realpath(ref.path)
    if not inside(real, ref.root):
        handle.close()
        raise OutsideLogdir(f"the file's real path is outside the logdir (a symlink): not "
                            f"served; set {SERVE_OUTSIDE_ENV}=1 to allow it")
    return handle


def check_servable(ref: FileRef) -> None:
    """Raise `NotRegularFile` or `OutsideLogdir` if the file, as it is now (not as it was at
    the last scan), may not be read as data: the check `open_to_serve` makes, for what is
    answered from a cache or memo without opening the file (a file swapped for a link since
    the scan). Nothing to check for a file not found under a local logdir."""
    if not ref.root or not is_local(ref.fs):
        return
    if not stat.S_ISREG(os.stat(ref.path).st_mode):
        raise NotRegularFile(f"{ref.path} is not a regular file (a FIFO, device or socket)")
    if not ref.serve_outside and not inside(os.path.realpath(ref.path), ref.root):
        raise OutsideLogdir(f"the file's real path is outside the logdir (a symlink): not "
                            f"served; set {SERVE_OUTSIDE_ENV}=1 to allow it")


def inside(real_path: str, root: str) -> bool:
    """Whether `real_path` is `root` or below it (both real paths)."""
    return real_path == root or real_path.startswith(root.rstrip(os.sep) + os.sep)


def filesystem(url: str) -> tuple[Any, str]:
    """The fsspec filesystem and the path within it for a local path or URL."""
    fs, path = url_to_fs(url)
    return fs, path.rstrip("/") or path


def file_ref(fs: Any, path: str, info: dict[str, Any] | None = None, root: str = "",
             serve_outside: bool = False) -> FileRef:
    info = info if info is not None else fs.info(path)
    stamp = info.get("mtime") or info.get("LastModified") or info.get("ETag") or info.get(
        "last_modified") or info.get("created") or ""
    return FileRef(fs, path, int(info.get("size") or 0), str(stamp), root, serve_outside)


def open_ref(url_or_path: str) -> FileRef:
    fs, path = filesystem(url_or_path)
    return file_ref(fs, path)


def iter_decompressed(handle: BinaryIO, *, on_truncated_gzip: Any = None) -> Iterator[bytes]:
    """Yield the file's bytes in pieces of at most CHUNK_SIZE, gunzipped on the fly when it
    starts with the gzip magic.

    A gzip stream that ends early (a job killed mid-write) or is corrupt yields all it could
    decompress and then calls `on_truncated_gzip(message, trailer_only)`, instead of raising
    and losing what came before; `trailer_only` is True when every byte inflated and only the
    gzip trailer (CRC, length) is wrong.
    """
    first = handle.read(CHUNK_SIZE)
    if not first.startswith(GZIP_MAGIC):
        while first:
            yield first
            first = handle.read(CHUNK_SIZE)
        return
    stream = decompressor()
    chunk = first
    while chunk:
        yield from stream.feed(chunk, CHUNK_SIZE)
        chunk = handle.read(CHUNK_SIZE)
    yield from stream.close(CHUNK_SIZE)
    if not stream.finished and on_truncated_gzip is not None:
        on_truncated_gzip(stream.error or "the gzip stream ends early", stream.trailer_error)


__all__ = ["FileRef", "NotRegularFile", "OutsideLogdir", "filesystem", "file_ref", "open_ref",
           "open_file", "open_to_serve", "check_servable", "read_bounded",
           "TooLarge", "inside", "iter_decompressed", "fsspec"]
