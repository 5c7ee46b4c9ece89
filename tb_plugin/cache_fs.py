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
import posixpath
import shutil
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

from .storage import filesystem

log = logging.getLogger(__name__)

T = TypeVar("T")
MARKER = "COMMIT.json"


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

    def load(self, key: str, read: Callable[[Path], T]) -> Optional[T]:
        """`read(folder)` over a local copy of the committed entry `key`; None when there is none
        or it does not check out (a digest mismatch, an unreadable file, a `read` failure)."""
        marker = self.get_json(f"{self._entry(key)}/{MARKER}")
        if not isinstance(marker, dict) or not isinstance(marker.get("files"), dict):
            return None
        folder = Path(tempfile.mkdtemp(prefix="torch-prof-shared-"))
        try:
            for name, digest in marker["files"].items():
                data = self.fs.cat_file(
                    f"{self.root}/{self._entry(key)}/{marker['generation']}/{name}")
                if hashlib.sha256(data).hexdigest() != digest:
                    raise ValueError(f"{name} does not match its digest")
                (folder / _safe_name(name)).write_bytes(data)
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

    def get_json(self, relative: str) -> Any:
        """The JSON object at `relative` (under the root), None when absent or unreadable."""
        try:
            return json.loads(self.fs.cat_file(f"{self.root}/{relative}"))
        except (OSError, ValueError):
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

    def writable(self) -> bool:
        """Probe whether this cache accepts writes (reported once when it does not)."""
        probe = f".probe/{uuid.uuid4().hex}.json"
        if not self.put_json(probe, {"probe": True}):
            return False
        with contextlib.suppress(OSError):
            self.fs.rm_file(f"{self.root}/{probe}")
        return True

    def _entry(self, key: str) -> str:
        return f"{key[:2]}/{key}"

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


def _safe_name(name: str) -> str:
    """Entry file names come from the marker: only plain names, never a path."""
    if not name or name != posixpath.basename(name) or name.startswith("."):
        raise ValueError(f"bad file name {name!r} in the commit marker")
    return name
