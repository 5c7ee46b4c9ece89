"""The cache's entries on fsspec storage (s3://, gs://, file:// on a shared filesystem, memory://),
shared by many writers (Ray workers) and readers (servers, CLIs) at once.

Object stores have no atomic rename of a folder, but they do write one object atomically. So an
entry is committed by a marker: a writer uploads the entry's files under a fresh generation
folder (`<entry>/<generation>/...`, never written again once complete), then writes the small
marker object `<entry>/COMMIT.json` naming the generation and the SHA-256 of every file. A
reader reads the marker first, then that generation's files, and checks their digests. So a
writer killed mid-upload leaves only an orphan generation that nobody reads, two writers of the
same entry both leave complete generations and the last marker wins (both hold the same parse),
and a reader never sees a half entry. On a local or shared POSIX filesystem (file://) the marker
is written to a temporary name and renamed into place; elsewhere one `pipe_file` is atomic.

A cache that cannot be written (read-only bucket, missing permission) is reported once and then
only read: the run still loads, it just parses what it cannot find.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import posixpath
import re
import shutil
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

from .ingest.scanner import scan_structure
from .storage import (
    CHUNK_SIZE,
    NotRegularFile,
    TooLarge,
    filesystem,
    inside,
    open_file,
    read_bounded,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
MARKER = "COMMIT.json"
MARKER_MAX_BYTES = 64 << 10  # a marker names a generation and a few files
JSON_MAX_BYTES = 256 << 20  # any JSON object read back from a cache (payloads, manifests)
MAX_JSON_DEPTH = 256  # payloads nest a few levels per tree level (the module tree)
MAX_ENTRY_FILES = 16
PINNED = "pinned-"  # payload files never evicted (a file's summary)
_KEY = re.compile(r"[0-9a-f]{64}")
_GENERATION = re.compile(r"[0-9a-f]{32}")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def is_url(root: object) -> bool:
    """Whether a cache location is an fsspec URL (kept as a string, never made a `Path`)."""
    return isinstance(root, str) and "://" in root


class SharedStore:
    """Entries (folders of files, committed by a marker) and small JSON objects under a URL."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.fs, self.root = filesystem(url)
        self._local = "file" in _protocols(self.fs) or "local" in _protocols(self.fs)
        self._lock = threading.Lock()
        self.read_only = False

    # -- entries ---------------------------------------------------------------------------------

    def load(self, key: str, read: Callable[[Path], T], max_bytes: int) -> Optional[T]:
        """`read(folder)` over a local copy of the committed entry `key`; None when there is none
        or it does not check out (a marker that is not one, a name that is not a plain file
        name, a file that is not a regular one or holds more than `max_bytes`, a digest
        mismatch, a `read` failure): the entry is then recomputed, never trusted."""
        marker = _marker(self.get_json(f"{self._entry(key)}/{MARKER}", MARKER_MAX_BYTES))
        if marker is None:
            return None
        generation, files = marker
        folder = Path(tempfile.mkdtemp(prefix="torch-prof-shared-"))
        try:
            for name, digest in files.items():
                source = self._inside(f"{self.root}/{self._entry(key)}/{generation}/{name}")
                if _copy_bounded(self.fs, source, folder / name, max_bytes) != digest:
                    raise ValueError(f"{name} does not match its digest")
            return read(folder)
        except Exception as exc:  # corrupt, partial or foreign: parse again (and overwrite)
            log.warning("torch-prof: ignoring unreadable shared cache entry %s/%s: %s",
                        self.url, key, exc)
            return None
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def save(self, key: str, write: Callable[[Path], None]) -> bool:
        """Write an entry with `write(folder)` into a local folder, upload it as a new
        generation, then commit it with the marker. False when the cache cannot be written."""
        if self.read_only:
            return False
        entry = self._entry(key)
        folder = Path(tempfile.mkdtemp(prefix="torch-prof-shared-"))
        try:
            write(folder)
            generation = uuid.uuid4().hex
            files = {}
            for path in sorted(folder.iterdir()):
                data = path.read_bytes()
                self._pipe(f"{self.root}/{entry}/{generation}/{path.name}", data)
                files[path.name] = hashlib.sha256(data).hexdigest()
            return self.put_json(f"{entry}/{MARKER}", {"generation": generation, "files": files})
        except OSError as exc:
            self._cannot_write(exc)
            return False
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    # -- small JSON objects ----------------------------------------------------------------------

    def get_json(self, relative: str, limit: int = JSON_MAX_BYTES) -> Any:
        """The JSON object at `relative` (under the root), None when absent or unreadable (a
        FIFO or device, over `limit` bytes, nested deeper than `MAX_JSON_DEPTH`)."""
        path = f"{self.root}/{relative}"
        try:
            return decode_json(read_bounded(self.fs, self._inside(path), limit))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("torch-prof: ignoring unreadable shared cache object %s/%s: %s",
                        self.url, relative, exc)
            return None

    def put_json(self, relative: str, value: Any) -> bool:
        """Write one JSON object atomically (readers see the old one or the new one)."""
        if self.read_only:
            return False
        path = f"{self.root}/{relative}"
        data = json.dumps(value).encode()
        try:
            if self._local:  # a POSIX filesystem: temporary name, then rename into place
                staging = f"{path}.tmp-{uuid.uuid4().hex}"
                self._pipe(staging, data)
                self.fs.mv(staging, path)
            else:  # an object store or memory://: one object put is atomic
                self.fs.pipe_file(path, data)
            return True
        except OSError as exc:
            self._cannot_write(exc)
            return False

    def _pipe(self, path: str, data: bytes) -> None:
        if self._local:
            self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        self.fs.pipe_file(path, data)

    def payload_path(self, key: str, name: str) -> str:
        """The path (under the root) of payload `name` stored beside entry `key` (a payload is
        one small JSON object, written atomically on its own)."""
        return f"{self._entry(key)}/payloads/{name}"

    def evict_payloads(self, key: str, budget: int, keep: str) -> None:
        """Delete the oldest payloads beside entry `key` until they fit in `budget` bytes
        (`keep`, the name just written, and pinned ones stay). Oldest by write time: a read
        of a shared object does not mark it used."""
        folder = f"{self.root}/{self._entry(key)}/payloads"
        try:
            listing = self.fs.ls(folder, detail=True)
        except OSError:
            return
        payloads = sorted((_written_at(info), info["name"], int(info.get("size") or 0))
                          for info in listing if _evictable(posixpath.basename(info["name"])))
        total = sum(size for _, _, size in payloads)
        for _, path, size in payloads:
            if total <= budget:
                break
            if posixpath.basename(path) != keep:
                with contextlib.suppress(OSError):
                    self.fs.rm_file(path)
                    total -= size

    def writable(self) -> bool:
        """Probe whether this cache accepts writes (reported once when it does not)."""
        probe = f".probe/{uuid.uuid4().hex}.json"
        if not self.put_json(probe, {"probe": True}):
            return False
        with contextlib.suppress(OSError):
            self.fs.rm_file(f"{self.root}/{probe}")
        return True

    def _entry(self, key: str) -> str:
        if not _KEY.fullmatch(key):
            raise ValueError(f"bad cache key {key!r}")
        return f"{key[:2]}/{key}"

    def _inside(self, path: str) -> str:
        """`path`, when it is inside the cache root (on a local filesystem: its real path, so
        no symlink leads out of the cache); raises NotRegularFile otherwise."""
        if self._local:
            real, root = os.path.realpath(path), os.path.realpath(self.root)
            if not inside(real, root):
                raise NotRegularFile(f"{path} leads out of the cache (a symlink)")
        return path

    def _cannot_write(self, exc: BaseException) -> None:
        with self._lock:
            if self.read_only:
                return
            self.read_only = True
        log.warning("torch-prof: cannot write to the cache %s (%s: %s); continuing without "
                    "storing parsed traces there", self.url, type(exc).__name__, exc)


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def _evictable(name: str) -> bool:
    return name.endswith(".json") and not name.startswith(PINNED)


def _written_at(info: dict[str, Any]) -> float:
    """When a listed object was written, as a number (local, memory:// and object stores
    name it differently)."""
    stamp = info.get("mtime") or info.get("LastModified") or info.get("last_modified") or \
        info.get("created") or 0
    if hasattr(stamp, "timestamp"):
        return float(stamp.timestamp())
    try:
        return float(stamp)
    except (TypeError, ValueError):
        return 0.0


def _marker(value: Any) -> Optional[tuple[str, dict[str, str]]]:
    """(generation, {file name: SHA-256}) of a commit marker, when it is one: a hex
    generation, plain file names (no separator, no `..`, no leading dot) and hex digests.
    Checked before any of it becomes part of a path."""
    if not isinstance(value, dict):
        return None
    generation, files = value.get("generation"), value.get("files")
    if not isinstance(generation, str) or not _GENERATION.fullmatch(generation):
        return _bad_marker(f"bad generation {str(generation)[:80]!r}")
    if not isinstance(files, dict) or not 0 < len(files) <= MAX_ENTRY_FILES:
        return _bad_marker("no file list")
    for name, digest in files.items():
        if not _FILE_NAME.fullmatch(name):  # a plain name: no separator, no leading dot
            return _bad_marker(f"bad file name {name[:80]!r}")
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            return _bad_marker(f"bad digest of {name!r}")
    return generation, files


def _bad_marker(why: str) -> None:
    log.warning("torch-prof: ignoring a shared cache commit marker: %s", why)
    return None


def _copy_bounded(fs: Any, source: str, target: Path, limit: int) -> str:
    """Copy `source` (a regular file of at most `limit` bytes, read in pieces) to `target`;
    its SHA-256."""
    digest = hashlib.sha256()
    copied = 0
    with open_file(fs, source) as handle, target.open("wb") as out:
        while chunk := handle.read(min(CHUNK_SIZE, limit + 1 - copied)):
            copied += len(chunk)
            if copied > limit:
                raise TooLarge(f"{source} is over the {limit}-byte limit")
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def decode_json(data: bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """JSON read back from a cache: nesting deeper than `max_depth` (a depth bomb, which
    would exhaust the stack here or later when the value is encoded) raises ValueError before
    anything is decoded."""
    depths = scan_structure(data, 0).depth_after
    if depths.size and int(depths.max()) > max_depth:
        raise ValueError(f"JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
