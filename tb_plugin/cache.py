"""On-disk cache of parsed tables, parsed memory-timeline exports, the columns of allocator
snapshots and analysed payloads, keyed by file identity + parser (or reader) version.

Reopening a run must not re-parse a 1 GB trace. Entries are plain numpy arrays (`.npz`, loaded
with allow_pickle=False) plus JSON, written to a temporary folder and renamed into place, so a
crash mid-write never leaves a half entry. Anything unreadable or mismatched is deleted and
recomputed, never trusted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import posixpath
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable, Literal, Optional, Union

import fsspec
import msgspec
import numpy as np

from .cache_fs import JSON_MAX_BYTES, PINNED, SharedStore, decode_json, is_url
from .ingest.memory_export import EXPORT_VERSION, RawTimeline
from .ingest.plain import PlainTable, from_plain, to_plain
from .ingest.schema import (
    PARSER_VERSION,
    TraceTable,
)
from .ingest.snapshot import (
    BLOCK_COLUMNS,
    ENTRY_COLUMNS,
    SEGMENT_COLUMNS,
    SNAPSHOT_VERSION,
    Snapshot,
)
from .settings import CACHE_DIR_ENV, Settings, settings
from .storage import FileRef, TooLarge, open_file, read_bounded

__all__ = ["CACHE_DIR_ENV", "TraceCache", "cache_location", "default_cache", "default_cache_dir"]

log = logging.getLogger(__name__)

_FORMAT = 1
_LOCAL = fsspec.filesystem("file")
_EXPORT_ARRAYS = ("ts_ns", "action", "bytes", "category")


class _Status(msgspec.Struct):
    """A manifest's parse status, validated on read (a wrong type is a corrupt entry)."""

    state: Literal["ok", "partial", "truncated", "error"]
    messages: list[str]
    skipped_events: int
    bytes_read: int


class _TableManifest(msgspec.Struct):
    format: int
    parser_version: int
    identity: str
    categories: dict[str, list[str]]
    metadata: dict[str, Any]
    status: _Status


class _ExportManifest(msgspec.Struct):
    format: int
    export_version: int
    identity: str
    skipped: int
    messages: list[str]


class _SnapshotManifest(msgspec.Struct):
    format: int
    snapshot_version: int
    identity: str
    skipped: int
    messages: list[str]
    stacks: list[list[tuple[str, int, str]]]


def default_cache_dir(config: Optional[Settings] = None) -> Path:
    """`config.cache_dir` ($TORCH_PROF_CACHE_DIR; default: the process's settings), else the
    user cache dir."""
    configured = (config or settings()).cache_dir
    if configured is not None:
        return configured
    from platformdirs import user_cache_dir  # not ours: imported only when it is needed

    return Path(user_cache_dir("torch-prof"))


def cache_location(value: Union[str, Path]) -> Union[str, Path]:
    """A cache location as the user wrote it: an fsspec URL stays a string, a folder a `Path`."""
    return value if is_url(value) else Path(value).expanduser()


class TraceCache:
    """Parsed tables and JSON payloads per trace file. `root=None` disables caching; a URL root
    (s3://, file://, memory://...) keeps the entries on fsspec storage (`cache_fs.SharedStore`).

    `config` is the settings of whoever opened it (default: the process's settings, read once
    here): the payload budget and the entry limit come from it, and the readers handed this
    cache take their other knobs from it too (`serve_outside_logdir` for discovery).
    """

    def __init__(self, root: Union[Path, str, None], config: Optional[Settings] = None) -> None:
        self.root = root
        self.config = config if config is not None else settings()
        self.shared = SharedStore(root) if is_url(root) else None

    @property
    def enabled(self) -> bool:
        return self.root is not None

    def writable(self) -> bool:
        """Whether entries can be stored (a shared cache that cannot is reported once)."""
        if self.shared is not None:
            return self.shared.writable()
        try:
            folder = Path(self.root)  # type: ignore[arg-type]
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
                return True
        except (OSError, TypeError) as exc:
            log.warning("torch-prof: cannot write to the cache %s (%s); continuing without it",
                        self.root, exc)
            return False

    def entry_limit(self, ref: FileRef) -> int:
        """The most bytes one file of `ref`'s entry may hold: what its trace can inflate to
        (the columns are never bigger than the JSON they come from), plus room for a small
        file."""
        return self.config.max_inflate_ratio * max(ref.size, 1) + (64 << 20)

    def _key(self, ref: FileRef, kind: str = "") -> str:
        """The entry key of `ref`'s parsed table (kind ""), parsed export or snapshot."""
        version = {"export": f"export{EXPORT_VERSION}",
                   "snapshot": f"snapshot{SNAPSHOT_VERSION}"}.get(kind, str(PARSER_VERSION))
        return hashlib.sha256(f"{version}|{_FORMAT}|{ref.identity()}".encode()).hexdigest()

    def _entry(self, ref: FileRef, kind: str = "") -> Path:
        """The entry folder of `ref`'s parsed table (kind ""), parsed export or snapshot."""
        assert self.root is not None
        key = self._key(ref, kind)
        return Path(self.root) / key[:2] / key

    # -- parsed tables -------------------------------------------------------------------------

    def load_table(self, ref: FileRef) -> Optional[TraceTable]:
        return self._load(ref, "", _read_table)

    def save_table(self, ref: FileRef, table: TraceTable) -> None:
        self._save(ref, "", lambda folder: _write_table(folder, ref, table))

    # -- parsed memory-timeline exports --------------------------------------------------------

    def load_export(self, ref: FileRef) -> Optional[RawTimeline]:
        return self._load(ref, "export", _read_export)

    def save_export(self, ref: FileRef, raw: RawTimeline) -> None:
        self._save(ref, "export", lambda folder: _write_export(folder, ref, raw))

    # -- columns of allocator snapshots (never the pickle itself) -------------------------------

    def load_snapshot(self, ref: FileRef) -> Optional[Snapshot]:
        return self._load(ref, "snapshot", _read_snapshot)

    def save_snapshot(self, ref: FileRef, snap: Snapshot) -> None:
        self._save(ref, "snapshot", lambda folder: _write_snapshot(folder, ref, snap))

    def _load(self, ref: FileRef, kind: str, read: Callable[[Path, FileRef, int], Any]) -> Any:
        if not self.enabled:
            return None
        limit = self.entry_limit(ref)
        if self.shared is not None:
            return self.shared.load(self._key(ref, kind), lambda folder: read(folder, ref, limit),
                                    limit)
        entry = self._entry(ref, kind)
        if not (entry / "manifest.json").exists():
            return None
        try:
            return read(entry, ref, limit)
        except Exception as exc:  # corrupt, partial or foreign: recompute
            log.warning("discarding unreadable cache entry %s: %s", entry, exc)
            shutil.rmtree(entry, ignore_errors=True)
            return None

    def _save(self, ref: FileRef, kind: str, write: Callable[[Path], None]) -> None:
        """Write an entry into a staging folder, then rename it into place."""
        if not self.enabled:
            return
        if self.shared is not None:
            self.shared.save(self._key(ref, kind), write)
            return
        entry = self._entry(ref, kind)
        staging: Optional[Path] = None
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=entry.parent))
            write(staging)
            shutil.rmtree(entry, ignore_errors=True)
            os.replace(staging, entry)
        except OSError as exc:  # a read-only or full cache dir only costs speed
            log.warning("cannot write the cache entry for %s: %s", ref.url, exc)
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)

    # -- analysed payloads ---------------------------------------------------------------------

    def get_payload(self, ref: FileRef, key: str, schema: Any = None, pinned: bool = False
                    ) -> Optional[Any]:
        """The payload stored under `key` for this file version, or None when there is none
        (caching off, never computed, unreadable, or not of type `schema`: then it is
        deleted); never computes one."""
        if not self.enabled:
            return None
        if self.shared is not None:
            stored = self.shared.get_json(self._shared_payload_path(ref, key, pinned))
            return _valid_value(stored, key, schema)
        return self._read_payload(self._payload_path(ref, key, pinned), key, schema)

    def payload(self, ref: FileRef, key: str, compute: Callable[[], Any], schema: Any = None,
                pinned: bool = False) -> Any:
        """A JSON-serialisable analysis result for this file, computed once across restarts.

        With `schema` (a TypedDict or Struct type), what is read back is validated against it
        (msgspec): a tampered or foreign value is deleted and recomputed, never served. The
        payloads of one file are bounded by $TORCH_PROF_PAYLOAD_CACHE_MB: the least recently
        used are deleted when a new one takes the folder over (`pinned` ones never are: the
        file's summary)."""
        if not self.enabled:
            return compute()
        if self.shared is not None:
            return self._shared_payload(ref, key, compute, schema, pinned)
        path = self._payload_path(ref, key, pinned)
        stored = self._read_payload(path, key, schema)
        if stored is not None:
            return stored
        value = compute()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"key": key, "value": value}))
            os.replace(tmp, path)
            _evict_payloads(path.parent, self.config.payload_cache, keep=path)
        except (OSError, TypeError, ValueError) as exc:
            log.warning("cannot cache payload %s for %s: %s", key, ref.url, exc)
        return value

    def stored_payload(self, ref: FileRef, key: str, schema: Any = None,
                       pinned: bool = False) -> Optional[Any]:
        """What `payload` would read back for this file and key, without computing it: None
        when nothing valid is stored (or the cache is off)."""
        if not self.enabled:
            return None
        if self.shared is not None:
            return _valid_value(self.shared.get_json(self._shared_payload_path(ref, key, pinned)),
                                key, schema)
        return self._read_payload(self._payload_path(ref, key, pinned), key, schema)

    def _shared_payload_path(self, ref: FileRef, key: str, pinned: bool = False) -> str:
        assert self.shared is not None
        name = hashlib.sha1(key.encode()).hexdigest() + ".json"
        return self.shared.payload_path(self._key(ref), _PINNED + name if pinned else name)

    def _shared_payload(self, ref: FileRef, key: str, compute: Callable[[], Any], schema: Any,
                        pinned: bool) -> Any:
        """`payload` on a shared (fsspec URL) cache: validated like the local one; a bad value
        is recomputed and overwritten. Bounded by the same budget, oldest written first."""
        assert self.shared is not None
        path = self._shared_payload_path(ref, key, pinned)
        stored = _valid_value(self.shared.get_json(path), key, schema)
        if stored is not None:
            return stored
        value = compute()
        try:
            if self.shared.put_json(path, {"key": key, "value": value}) and not pinned:
                self.shared.evict_payloads(self._key(ref), self.config.payload_cache,
                                           keep=posixpath.basename(path))
        except (TypeError, ValueError) as exc:
            log.warning("cannot cache payload %s for %s: %s", key, ref.url, exc)
        return value

    def _payload_path(self, ref: FileRef, key: str, pinned: bool = False) -> Path:
        name = hashlib.sha1(key.encode()).hexdigest() + ".json"
        return self._entry(ref) / "payloads" / (_PINNED + name if pinned else name)

    @staticmethod
    def _read_payload(path: Path, key: str, schema: Any) -> Optional[Any]:
        try:
            stored = decode_json(read_bounded(_LOCAL, str(path), JSON_MAX_BYTES))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:  # a FIFO, a device, too big, too deep, not JSON
            return _discard(path, f"unreadable ({exc})")
        if not isinstance(stored, dict) or stored.get("key") != key or "value" not in stored:
            return _discard(path, "not an entry of this key")
        value = stored["value"]
        if schema is not None:
            try:
                msgspec.convert(value, schema)
            except msgspec.ValidationError as exc:
                return _discard(path, f"not a valid payload ({exc})")
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: evicted last
        return value


def _valid_value(stored: Any, key: str, schema: Any) -> Optional[Any]:
    """The value of a stored `{"key", "value"}` entry when it is this key's and of `schema`."""
    if not isinstance(stored, dict) or stored.get("key") != key or "value" not in stored:
        return None
    if schema is not None:
        try:
            msgspec.convert(stored["value"], schema)
        except msgspec.ValidationError as exc:
            log.warning("ignoring a cached payload of %s: not valid (%s); it is recomputed",
                        key, exc)
            return None
    return stored["value"]


def _discard(path: Path, why: str) -> None:
    log.warning("discarding cached payload %s: %s; it is recomputed", path, why)
    with contextlib.suppress(OSError):
        path.unlink()
    return None


_PINNED = PINNED  # payload files never evicted


def _evict_payloads(folder: Path, budget: int, keep: Path) -> None:
    """Delete the least recently used payload files of `folder` until it fits in `budget`
    bytes (`keep`, the one just written, stays whatever its size)."""
    entries = []
    total = 0
    with os.scandir(folder) as listing:
        for entry in listing:
            if entry.name.endswith(".json") and not entry.name.startswith(_PINNED):
                stat = entry.stat()
                entries.append((stat.st_mtime_ns, entry.path, stat.st_size))
                total += stat.st_size
    if total <= budget:
        return
    for _, path, size in sorted(entries):
        if total <= budget:
            break
        if path != str(keep):
            with contextlib.suppress(OSError):
                os.unlink(path)
                total -= size


def _read_manifest(folder: Path, limit: int, schema: Any) -> dict[str, Any]:
    """An entry's manifest: a regular file, bounded, not nested too deep, of `schema`."""
    path = str(folder / "manifest.json")
    manifest = decode_json(read_bounded(_LOCAL, path, min(limit, JSON_MAX_BYTES)))
    msgspec.convert(manifest, schema)  # raises on any field of the wrong type
    return manifest


@contextlib.contextmanager
def _open_npz(path: Path, limit: int) -> Iterator[Any]:
    """An entry's arrays: a regular file (opened without blocking), whose members unpack to
    no more than the entry limit (a compressed member is never inflated past it)."""
    with open_file(_LOCAL, str(path)) as handle, np.load(handle, allow_pickle=False) as arrays:
        unpacked = sum(info.file_size for info in arrays.zip.infolist())
        if unpacked > limit:
            raise TooLarge(f"{path} unpacks to {unpacked} bytes, over the entry limit")
        yield arrays


def _write_table(folder: Path, ref: FileRef, table: TraceTable) -> None:
    plain = to_plain(table)
    np.savez(folder / "columns.npz", **plain.arrays)
    manifest = {
        "format": _FORMAT,
        "parser_version": PARSER_VERSION,
        "identity": ref.identity(),
        "categories": plain.categories,
        "metadata": plain.metadata,
        "status": plain.status,
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _read_table(folder: Path, ref: FileRef, limit: int) -> TraceTable:
    manifest = _read_manifest(folder, limit, _TableManifest)
    if manifest.get("identity") != ref.identity() or manifest.get("parser_version") != (
        PARSER_VERSION
    ):
        raise ValueError("entry belongs to another file or parser version")
    with _open_npz(folder / "columns.npz", limit) as arrays:
        plain = PlainTable({key: arrays[key] for key in arrays.files}, manifest["categories"],
                           manifest["metadata"], manifest["status"])
    return from_plain(plain, validate=True)  # codes read from disk are checked


def _write_export(folder: Path, ref: FileRef, raw: RawTimeline) -> None:
    np.savez(folder / "records.npz", **{name: getattr(raw, name) for name in _EXPORT_ARRAYS})
    manifest = {
        "format": _FORMAT,
        "export_version": EXPORT_VERSION,
        "identity": ref.identity(),
        "skipped": raw.skipped,
        "messages": raw.messages,
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _read_export(folder: Path, ref: FileRef, limit: int) -> RawTimeline:
    manifest = _read_manifest(folder, limit, _ExportManifest)
    if manifest.get("identity") != ref.identity() or manifest.get("export_version") != (
        EXPORT_VERSION
    ):
        raise ValueError("entry belongs to another file or export reader version")
    with _open_npz(folder / "records.npz", limit) as arrays:
        records = {name: arrays[name].astype(np.int64, copy=False) for name in _EXPORT_ARRAYS}
    return RawTimeline(**records, skipped=int(manifest["skipped"]),
                       messages=list(manifest["messages"]))


_SNAPSHOT_PARTS = (("entries", ENTRY_COLUMNS), ("segments", SEGMENT_COLUMNS),
                   ("blocks", BLOCK_COLUMNS))


def _write_snapshot(folder: Path, ref: FileRef, snap: Snapshot) -> None:
    np.savez(folder / "snapshot.npz", **{f"{part}.{name}": getattr(snap, part)[name]
                                         for part, names in _SNAPSHOT_PARTS for name in names})
    manifest = {"format": _FORMAT, "snapshot_version": SNAPSHOT_VERSION,
                "identity": ref.identity(), "skipped": snap.skipped,
                "messages": snap.messages, "stacks": snap.stacks}
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _read_snapshot(folder: Path, ref: FileRef, limit: int) -> Snapshot:
    manifest = _read_manifest(folder, limit, _SnapshotManifest)
    if manifest.get("identity") != ref.identity() or manifest.get("snapshot_version") != (
        SNAPSHOT_VERSION
    ):
        raise ValueError("entry belongs to another file or snapshot reader version")
    with _open_npz(folder / "snapshot.npz", limit) as arrays:
        parts = {part: {name: arrays[f"{part}.{name}"] for name in names}
                 for part, names in _SNAPSHOT_PARTS}
    _check_snapshot_columns(parts, len(manifest["stacks"]))
    stacks = [[(str(f), int(line), str(n)) for f, line, n in stack]
              for stack in manifest["stacks"]]
    return Snapshot(**parts, stacks=stacks, skipped=int(manifest["skipped"]),
                    messages=list(manifest["messages"]))


def _check_snapshot_columns(parts: dict[str, dict[str, np.ndarray]], stacks: int) -> None:
    """The columns as `ingest.snapshot` makes them: 1-D, int64 (float64 times), one length per
    part, and every index (stack, segment) inside what it indexes; raises ValueError if not."""
    for part, columns in parts.items():
        lengths = {values.shape for values in columns.values()}
        if len(lengths) != 1 or len(next(iter(lengths))) != 1:
            raise ValueError(f"snapshot {part} columns of different shapes")
        for name, values in columns.items():
            wanted = np.float64 if name == "time_us" else np.int64
            if values.dtype != wanted:
                raise ValueError(f"snapshot column {part}.{name} is {values.dtype}")
    segments = len(parts["segments"]["address"])
    for values, bound in ((parts["entries"]["stack"], stacks), (parts["blocks"]["stack"], stacks),
                          (parts["blocks"]["segment"], segments)):
        if values.size and (values.min() < -1 or values.max() >= bound):
            raise ValueError("snapshot index out of range")


_default: Optional[TraceCache] = None


def default_cache() -> TraceCache:
    """The process-wide cache: $TORCH_PROF_CACHE_DIR, else the user cache dir; 'off' disables.
    Opened with the process's settings when first asked for (`open_cache`)."""
    global _default
    if _default is None:
        _default = open_cache(settings())
    return _default


def open_cache(config: Settings) -> TraceCache:
    """The cache `config` names (`cache_off`, `cache_url`, else `cache_dir` or the user cache
    dir), carrying `config`."""
    return TraceCache(None if config.cache_off else config.cache_url
                      or default_cache_dir(config), config)
