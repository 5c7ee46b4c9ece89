"""Named baselines for `torch-prof compare --baseline NAME`: the per-step summaries of a
logdir (`analysis.compare.summary`), not its traces, as one versioned JSON object per name.

The store is a folder: `<cache dir>/baselines` by default, or any fsspec URL (`--store
s3://bucket/baselines`, `file:///shared/baselines`, ...). `NAME.json` holds
`{"format": "torch-prof-baseline", "version": 1, "name", "created", "source", "runs": [[file
summary, ...], ...]}`. A local object is written beside its final name and renamed into place
(a reader never sees half of one); a remote one is one PUT.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any, Union

from fsspec.implementations.local import LocalFileSystem

from .analysis.compare.summary import SUMMARY_VERSION
from .storage import filesystem

FORMAT = "torch-prof-baseline"
STORE_VERSION = 1
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


class BaselineError(Exception):
    """A baseline that cannot be saved or read: the message says why."""


def default_store(cache_dir: Union[str, Path]) -> str:
    return os.path.join(os.fspath(cache_dir), "baselines") if not isinstance(
        cache_dir, str) or "://" not in cache_dir else cache_dir.rstrip("/") + "/baselines"


def _path(store: str, name: str) -> tuple[Any, str]:
    if not _NAME.match(name):
        raise BaselineError(f"bad baseline name {name!r}: use letters, digits, '_', '.', '-' "
                            "(not starting with '.' or '-', at most 128 characters)")
    fs, root = filesystem(store)
    return fs, f"{root.rstrip('/')}/{name}.json"


def save_baseline(store: str, name: str, runs: list[list[dict[str, Any]]], source: str
                  ) -> str:
    """Write the baseline `name` (replacing one of that name); returns where it went."""
    fs, path = _path(store, name)
    body = json.dumps({"format": FORMAT, "version": STORE_VERSION, "name": name,
                       "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "source": source, "runs": runs}).encode("utf-8")
    try:
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        if isinstance(fs, LocalFileSystem):
            partial = f"{path}.{uuid.uuid4().hex}.partial"
            fs.pipe_file(partial, body)
            os.replace(partial, path)
        else:
            fs.pipe_file(path, body)
    except OSError as exc:
        raise BaselineError(f"cannot write baseline {name!r} to {store}: {exc}") from None
    return fs.unstrip_protocol(path) if not isinstance(fs, LocalFileSystem) else path


def load_baseline(store: str, name: str) -> dict[str, Any]:
    """The stored baseline `name`; BaselineError when it is missing, unreadable, or of
    another format or version."""
    fs, path = _path(store, name)
    try:
        raw = fs.cat_file(path)
    except FileNotFoundError:
        known = list_baselines(store)
        raise BaselineError(f"no baseline {name!r} in {store}; baselines: "
                            f"{', '.join(known) or '-'}") from None
    except OSError as exc:
        raise BaselineError(f"cannot read baseline {name!r} from {store}: {exc}") from None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise BaselineError(f"baseline {name!r} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BaselineError(f"{path} is not a torch-prof baseline")
    if data.get("version") != STORE_VERSION:
        raise BaselineError(f"baseline {name!r} has version {data.get('version')!r}; this "
                            f"torch-prof reads version {STORE_VERSION}: save it again")
    runs = data.get("runs")
    if not isinstance(runs, list) or not all(
            isinstance(run, list) and all(isinstance(s, dict) and s.get(
                "version") == SUMMARY_VERSION for s in run) for run in runs):
        raise BaselineError(f"baseline {name!r} holds summaries of another version: save it "
                            "again")
    return data


def list_baselines(store: str) -> list[str]:
    fs, root = filesystem(store)
    try:
        names = fs.ls(root, detail=False)
    except (FileNotFoundError, OSError):
        return []
    return sorted(n.rsplit("/", 1)[-1][:-5] for n in names if n.endswith(".json"))
