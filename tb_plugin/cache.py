"""On-disk cache of parsed tables and analysed payloads, keyed by file identity + parser version.

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
from typing import Any, Callable, Optional

import numpy as np
import pandas as pd

from .ingest.schema import (
    PARSER_VERSION,
    TABLE_COLUMNS,
    ParseStatus,
    TraceMetadata,
    TraceTable,
)
from .storage import FileRef

log = logging.getLogger(__name__)

CACHE_DIR_ENV = "TORCH_PROF_CACHE_DIR"
CACHE_OFF_VALUES = {"off", "none", "0", "false"}
_FORMAT = 1


def default_cache_dir() -> Path:
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("torch-prof"))


class TraceCache:
    """Parsed tables and JSON payloads per trace file. `root=None` disables caching."""

    def __init__(self, root: Optional[Path]) -> None:
        self.root = root

    @property
    def enabled(self) -> bool:
        return self.root is not None

    def _entry(self, ref: FileRef) -> Path:
        assert self.root is not None
        key = hashlib.sha256(f"{PARSER_VERSION}|{_FORMAT}|{ref.identity()}".encode()).hexdigest()
        return self.root / key[:2] / key

    # -- parsed tables -------------------------------------------------------------------------

    def load_table(self, ref: FileRef) -> Optional[TraceTable]:
        if not self.enabled:
            return None
        entry = self._entry(ref)
        if not (entry / "manifest.json").exists():
            return None
        try:
            return _read_table(entry, ref)
        except Exception as exc:  # corrupt, partial or foreign: recompute
            log.warning("discarding unreadable cache entry %s: %s", entry, exc)
            shutil.rmtree(entry, ignore_errors=True)
            return None

    def save_table(self, ref: FileRef, table: TraceTable) -> None:
        if not self.enabled:
            return
        entry = self._entry(ref)
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=entry.parent))
            _write_table(staging, ref, table)
            shutil.rmtree(entry, ignore_errors=True)
            os.replace(staging, entry)
        except OSError as exc:  # a read-only or full cache dir only costs speed
            log.warning("cannot write the cache entry for %s: %s", ref.url, exc)
            shutil.rmtree(locals().get("staging", entry / ".none"), ignore_errors=True)

    # -- analysed payloads ---------------------------------------------------------------------

    def get_payload(self, ref: FileRef, key: str) -> Optional[Any]:
        """The payload stored under `key` for this file version, or None when there is none
        (caching off, never computed, unreadable); never computes one."""
        if not self.enabled:
            return None
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


_default: Optional[TraceCache] = None


def default_cache() -> TraceCache:
    """The process-wide cache: $TORCH_PROF_CACHE_DIR, else the user cache dir; 'off' disables."""
    global _default
    if _default is None:
        configured = os.environ.get(CACHE_DIR_ENV, "")
        root = None if configured.lower() in CACHE_OFF_VALUES else default_cache_dir()
        _default = TraceCache(root)
    return _default


def set_default_cache(cache: TraceCache) -> None:
    global _default
    _default = cache
