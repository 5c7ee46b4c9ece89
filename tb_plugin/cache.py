"""On-disk cache of parsed tables, parsed memory-timeline exports, the columns of allocator
snapshots and analysed payloads, keyed by file identity + parser (or reader) version.

Reopening a run must not re-parse a 1 GB trace. Entries are plain numpy arrays (`.npz`, loaded
with allow_pickle=False) plus JSON, written to a temporary folder and renamed into place, so a
crash mid-write never leaves a half entry. Anything unreadable or mismatched is deleted and
recomputed, never trusted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional, Union

import numpy as np
import pandas as pd

from .cache_fs import SharedStore, is_url
from .ingest.memory_export import EXPORT_VERSION, RawTimeline
from .ingest.schema import (
    PARSER_VERSION,
    TABLE_COLUMNS,
    ParseStatus,
    TraceMetadata,
    TraceTable,
)
from .ingest.snapshot import (
    BLOCK_COLUMNS,
    ENTRY_COLUMNS,
    SEGMENT_COLUMNS,
    SNAPSHOT_VERSION,
    Snapshot,
)
from .settings import CACHE_DIR_ENV, settings
from .storage import FileRef

__all__ = ["CACHE_DIR_ENV", "TraceCache", "cache_location", "default_cache", "default_cache_dir"]

log = logging.getLogger(__name__)

_FORMAT = 1
_EXPORT_ARRAYS = ("ts_ns", "action", "bytes", "category")


def default_cache_dir() -> Path:
    """$TORCH_PROF_CACHE_DIR, else the user cache dir."""
    configured = settings().cache_dir
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
    """

    def __init__(self, root: Union[Path, str, None]) -> None:
        self.root = root
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

    def _load(self, ref: FileRef, kind: str, read: Callable[[Path, FileRef], Any]) -> Any:
        if not self.enabled:
            return None
        if self.shared is not None:
            return self.shared.load(self._key(ref, kind), lambda folder: read(folder, ref))
        entry = self._entry(ref, kind)
        if not (entry / "manifest.json").exists():
            return None
        try:
            return read(entry, ref)
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

    def get_payload(self, ref: FileRef, key: str) -> Optional[Any]:
        """The payload stored under `key` for this file version, or None when there is none
        (caching off, never computed, unreadable); never computes one."""
        if not self.enabled:
            return None
        if self.shared is not None:
            return _payload_value(self.shared.get_json(self._payload_path(ref, key)), key)
        path = self._entry(ref) / "payloads" / (hashlib.sha1(key.encode()).hexdigest() + ".json")
        try:
            stored = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return stored.get("value") if isinstance(stored, dict) and stored.get("key") == key \
            else None

    def payload(self, ref: FileRef, key: str, compute: Callable[[], Any]) -> Any:
        """A JSON-serialisable analysis result for this file, computed once across restarts."""
        if not self.enabled:
            return compute()
        if self.shared is not None:
            return self._shared_payload(ref, key, compute)
        path = self._entry(ref) / "payloads" / (hashlib.sha1(key.encode()).hexdigest() + ".json")
        try:
            stored = json.loads(path.read_text())
            if stored.get("key") == key:
                return stored["value"]
        except (OSError, ValueError, KeyError, AttributeError):
            pass
        value = compute()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"key": key, "value": value}))
            os.replace(tmp, path)
        except (OSError, TypeError, ValueError) as exc:
            log.warning("cannot cache payload %s for %s: %s", key, ref.url, exc)
        return value

    def _payload_path(self, ref: FileRef, key: str) -> str:
        assert self.shared is not None
        return self.shared.payload_path(self._key(ref),
                                        hashlib.sha1(key.encode()).hexdigest() + ".json")

    def _shared_payload(self, ref: FileRef, key: str, compute: Callable[[], Any]) -> Any:
        assert self.shared is not None
        path = self._payload_path(ref, key)
        stored = self.shared.get_json(path)
        if isinstance(stored, dict) and stored.get("key") == key and "value" in stored:
            return stored["value"]
        value = compute()
        try:
            self.shared.put_json(path, {"key": key, "value": value})
        except (TypeError, ValueError) as exc:
            log.warning("cannot cache payload %s for %s: %s", key, ref.url, exc)
        return value


def _payload_value(stored: Any, key: str) -> Any:
    return stored.get("value") if isinstance(stored, dict) and stored.get("key") == key else None


def _write_table(folder: Path, ref: FileRef, table: TraceTable) -> None:
    arrays: dict[str, np.ndarray] = {}
    categories: dict[str, list[str]] = {}
    for name, frame in table.tables().items():
        for column in TABLE_COLUMNS[name]:
            series = frame[column]
            key = f"{name}.{column}"
            if isinstance(series.dtype, pd.CategoricalDtype):
                arrays[key] = series.cat.codes.to_numpy()
                categories[key] = [str(c) for c in series.cat.categories]
            else:
                arrays[key] = series.to_numpy()
    np.savez(folder / "columns.npz", **arrays)
    manifest = {
        "format": _FORMAT,
        "parser_version": PARSER_VERSION,
        "identity": ref.identity(),
        "categories": categories,
        "metadata": table.metadata.to_json(),
        "status": table.status.to_json(),
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _read_table(folder: Path, ref: FileRef) -> TraceTable:
    manifest = json.loads((folder / "manifest.json").read_text())
    if manifest.get("identity") != ref.identity() or manifest.get("parser_version") != (
        PARSER_VERSION
    ):
        raise ValueError("entry belongs to another file or parser version")
    categories = manifest["categories"]
    frames = {}
    with np.load(folder / "columns.npz", allow_pickle=False) as arrays:
        for name, columns in TABLE_COLUMNS.items():
            data = {}
            for column, dtype in columns.items():
                key = f"{name}.{column}"
                values = arrays[key]
                if dtype == "category":
                    data[column] = pd.Categorical.from_codes(
                        values, categories=pd.Index(categories[key], dtype=object))
                else:
                    data[column] = values.astype(dtype, copy=False)
            frames[name] = pd.DataFrame(data, copy=False)
    status = ParseStatus(**manifest["status"])
    return TraceTable(metadata=TraceMetadata.from_json(manifest["metadata"]), status=status,
                      **frames)


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


def _read_export(folder: Path, ref: FileRef) -> RawTimeline:
    manifest = json.loads((folder / "manifest.json").read_text())
    if manifest.get("identity") != ref.identity() or manifest.get("export_version") != (
        EXPORT_VERSION
    ):
        raise ValueError("entry belongs to another file or export reader version")
    with np.load(folder / "records.npz", allow_pickle=False) as arrays:
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


def _read_snapshot(folder: Path, ref: FileRef) -> Snapshot:
    manifest = json.loads((folder / "manifest.json").read_text())
    if manifest.get("identity") != ref.identity() or manifest.get("snapshot_version") != (
        SNAPSHOT_VERSION
    ):
        raise ValueError("entry belongs to another file or snapshot reader version")
    with np.load(folder / "snapshot.npz", allow_pickle=False) as arrays:
        parts = {part: {name: arrays[f"{part}.{name}"] for name in names}
                 for part, names in _SNAPSHOT_PARTS}
    stacks = [[(str(f), int(line), str(n)) for f, line, n in stack]
              for stack in manifest["stacks"]]
    return Snapshot(**parts, stacks=stacks, skipped=int(manifest["skipped"]),
                    messages=list(manifest["messages"]))


_default: Optional[TraceCache] = None


def default_cache() -> TraceCache:
    """The process-wide cache: $TORCH_PROF_CACHE_DIR, else the user cache dir; 'off' disables."""
    global _default
    if _default is None:
        config = settings()
        _default = TraceCache(None if config.cache_off else config.cache_url
                              or default_cache_dir())
    return _default
