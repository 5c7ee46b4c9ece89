"""Find runs, workers and spans under a logdir (local path or any fsspec URL).

A run is any folder under the logdir (recursively, the logdir itself included) that holds trace
files. Trace files are `<worker>[.<span>].pt.trace.json[.gz]` as torch's
`tensorboard_trace_handler` names them, or any other `*.json[.gz]` whose first bytes show a
Chrome trace. `*.raw.json.gz` memory-timeline exports belong to their run as memory data, and
each span carries the export written next to its trace (`matching_timeline`). Allocator
snapshots (`*.pickle`, `*snapshot*.pkl`, as `torch.cuda.memory._dump_snapshot` writes them)
belong to their run too; a span carries the one named after its trace
(`<worker>.<ts>*.pickle`), else the run's only snapshot (`matching_snapshot`); of several,
the Memory view shows the one whose period overlaps the trace. Nothing is
read here: a snapshot is only unpickled (restricted to plain data) when a view asks for it.
"""

from __future__ import annotations

import logging
import math
import os
import posixpath
import re
import stat as stat_module
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from fsspec.implementations.local import LocalFileSystem

from .compression import GZIP_MAGIC, decompressor
from .settings import SERVE_OUTSIDE_ENV
from .storage import FileRef, file_ref, filesystem, inside, is_local, open_file

log = logging.getLogger(__name__)

TRACE_NAME = re.compile(r"^(?P<worker>.+?)(?:\.(?P<span>\d+))?\.pt\.trace\.json(?:\.gz)?$")
MEMORY_TIMELINE_NAME = re.compile(r"^(?P<worker>.+?)(?:\.(?P<span>\d+))?\.raw\.json(?:\.gz)?$")
_TRACE_SUFFIX = re.compile(r"\.pt\.trace\.json(?:\.gz)?$")
_RAW_SUFFIX = re.compile(r"\.raw\.json(?:\.gz)?$")
_PAIRED_EXPORT = re.compile(r"\.\d+\.raw\.json(?:\.gz)?$")  # named after a trace (+ its ts)
SNAPSHOT_NAME = re.compile(r"(?:\.pickle(?:\.gz)?|^.*snapshot.*\.pkl(?:\.gz)?)$", re.I)
OTHER_JSON_NAME = re.compile(r"^(?P<worker>.+)\.json(?:\.gz)?$")
DEFAULT_SPAN = "default"
_SNIFF_BYTES = 64 << 10
#: A JSON object is a trace when its first bytes hold `"traceEvents"`, or both of the keys
#: torch writes before it (`"schemaVersion"` alone is common in other JSON files).
_EVENTS_HINT = b'"traceEvents"'
_HEADER_HINTS = (b'"schemaVersion"', b'"deviceProperties"')
_SNIFF_MEMO_SIZE = 1 << 18  # remembered sniff verdicts (a rescan re-reads no unchanged file)
_sniffed: OrderedDict[tuple[str, int, Any], bool] = OrderedDict()
_reported: set[str] = set()  # paths already logged as skipped (once per process, not per scan)
_LEGACY_HINT = re.compile(rb'"pid"\s*:\s*"CPU Functions"')
#: `RunScanner`: a folder in which something was modified this recently is listed on every
#: scan; every `FULL_RESCAN_S` every folder is.
HOT_S = 60.0
FULL_RESCAN_S = 60.0


@dataclass
class SpanFile:
    span: str  # "1", "2"... in numeric order of the file's timestamp, or "default"
    timestamp: int | None
    ref: FileRef
    #: The memory-timeline export of this span (`matching_timeline`), if the run has one.
    memory_timeline: FileRef | None = None
    #: The allocator snapshot of this span (`matching_snapshot`), if the run has one.
    memory_snapshot: FileRef | None = None


@dataclass
class RunInfo:
    name: str
    path: str
    workers: dict[str, list[SpanFile]] = field(default_factory=dict)  # spans in numeric order
    memory_timelines: list[FileRef] = field(default_factory=list)
    memory_snapshots: list[FileRef] = field(default_factory=list)  # sorted by name

    def span_file(self, worker: str, span: str) -> SpanFile | None:
        return next((s for s in self.workers.get(worker, []) if s.span == span), None)


def discover_runs(logdir: str, *, serve_outside_logdir: bool = False) -> list[RunInfo]:
    """All runs under `logdir`, sorted by name. Unreadable folders are logged and skipped.
    `serve_outside_logdir` (`Settings.serve_outside_logdir`, read by the entry point) lets
    memory exports and snapshots whose real path is outside the logdir be attached and served."""
    fs, root = filesystem(logdir)
    real_root = os.path.realpath(root) if is_local(fs) else ""
    runs = []
    for folder, files in _walk(fs, root):
        run = _run_from_folder(fs, root, folder, files, real_root, serve_outside_logdir)
        if run is not None:
            runs.append(run)
    return sorted(runs, key=lambda r: r.name)


def discover_run(logdir: str, name: str, *, serve_outside_logdir: bool = False
                 ) -> RunInfo | None:
    """The run `name` of `logdir`, named as `discover_runs` names it, listing only its own
    folder (the CLI's `report` reads one run of a logdir of thousands). None when no such run
    is there; a name with an empty, `.` or `..` part is never a path below the logdir, so it is
    looked up as the logdir's own run only."""
    fs, root = filesystem(logdir)
    real_root = os.path.realpath(root) if is_local(fs) else ""
    folders = [root] if name == _run_name(root, root) else []
    if name and all(part not in ("", ".", "..") for part in name.split("/")):
        folders.append(posixpath.join(root, name))
    for folder in folders:
        files = _list_folder(fs, folder)
        run = None if files is None else _run_from_folder(fs, root, folder, files, real_root,
                                                          serve_outside_logdir)
        if run is not None and run.name == name:
            return run
    return None


def _list_folder(fs: Any, folder: str) -> dict[str, dict[str, Any]] | None:
    """{file name: info} of one folder's files (as `_walk` lists them), None if unlistable."""
    if isinstance(fs, LocalFileSystem):
        try:
            names = os.listdir(folder)
        except OSError:
            return None
        infos = {name: _file_info(os.path.join(folder, name), name) for name in names}
        return {name: info for name, info in infos.items() if info is not None}
    try:
        entries = fs.ls(folder, detail=True)
    except (OSError, ValueError):
        return None
    return {posixpath.basename(e["name"].rstrip("/")): e for e in entries
            if e.get("type") == "file"}


@dataclass
class _Folder:
    """What the last listing of one local folder found (`RunScanner`)."""

    stat: tuple[int, int, int]  # (st_dev, st_ino, st_mtime_ns) of the folder when listed
    real: str  # its real path
    subdirs: list[str]
    files: tuple[tuple[str, int, int], ...]  # (name, size, mtime) of its files as listed
    run: RunInfo | None
    hot_until: float  # wall time until which it is listed again on every scan


class RunScanner:
    """`discover_runs` for a server's rescans, which lists only what may have changed.

    A local folder whose own (device, inode, mtime) is as it was when it was last listed, and
    in which nothing (the folder, a file) was modified in the last `hot_s` seconds, is not
    listed again: its run is the one found then (the same `RunInfo` object), and its
    subfolders are visited. Adding, removing or renaming an entry changes the folder's mtime,
    so new runs and new files are found on the next scan; a file being written keeps its
    folder hot (listed, its files stat'ed, on every scan) until it has been left alone for
    `hot_s` seconds; and every `full_s` seconds everything is listed again, which finds a
    file rewritten in place long after its folder went cold (a folder listed again whose files
    have the sizes and mtimes they had keeps its `RunInfo`). Other filesystems are listed in
    full each time (`discover_runs`). `listed` and `stats` count the folders listed and the
    files stat'ed by the last scan.
    """

    def __init__(self, *, hot_s: float = HOT_S, full_s: float = FULL_RESCAN_S,
                 clock: Callable[[], float] = time.time,
                 serve_outside_logdir: bool = False) -> None:
        self.hot_s, self.full_s, self._clock = hot_s, full_s, clock
        self.serve_outside_logdir = serve_outside_logdir
        self._folders: dict[str, _Folder] = {}
        self._logdir: str | None = None
        self._full_at = -math.inf
        self.listed = self.stats = 0

    def __call__(self, logdir: str) -> list[RunInfo]:
        fs, root = filesystem(logdir)
        if not isinstance(fs, LocalFileSystem):
            return discover_runs(logdir, serve_outside_logdir=self.serve_outside_logdir)
        now = self._clock()
        full = now - self._full_at >= self.full_s
        if logdir != self._logdir:
            self._folders, self._logdir = {}, logdir
        if full:
            self._full_at = now
        self.listed = self.stats = 0
        real_root = os.path.realpath(root)
        folders: dict[str, _Folder] = {}
        seen: set[str] = set()
        runs, pending = [], [root]
        while pending:
            folder = pending.pop()
            entry = self._folder(fs, root, folder, real_root, now, full)
            if entry is None or entry.real in seen:  # unreadable, or a loop / seen before
                continue
            seen.add(entry.real)
            folders[folder] = entry
            if entry.run is not None:
                runs.append(entry.run)
            pending.extend(reversed(entry.subdirs))
        self._folders = folders
        return sorted(runs, key=lambda r: r.name)

    def _folder(self, fs: Any, root: str, folder: str, real_root: str, now: float,
                full: bool) -> _Folder | None:
        try:
            st = os.stat(folder)
        except OSError as exc:
            _log_walk_error(exc)
            return None
        key = (st.st_dev, st.st_ino, st.st_mtime_ns)
        old = self._folders.get(folder)
        if old is not None and old.stat == key and now >= old.hot_until and not full:
            return old
        self.listed += 1
        subdirs, infos = [], {}
        try:
            with os.scandir(folder) as entries:
                names = sorted((e.name, e.is_dir()) for e in entries)
        except OSError as exc:
            _log_walk_error(exc)
            return None
        newest = st.st_mtime_ns
        for name, is_dir in names:
            path = os.path.join(folder, name)
            if is_dir:
                subdirs.append(path)
                continue
            self.stats += 1
            info = _file_info(path, name)
            if info is not None:
                infos[name] = info
                newest = max(newest, info["mtime"])
        files = tuple((name, info["size"], info["mtime"]) for name, info in infos.items())
        if old is not None and old.files == files and old.stat[:2] == key[:2]:
            run, real = old.run, old.real  # listed again, found as it was: the same run
        else:
            run = _run_from_folder(fs, root, folder, infos, real_root,
                                   self.serve_outside_logdir)
            real = os.path.realpath(folder)
        return _Folder(key, real, subdirs, files, run, newest / 1e9 + self.hot_s)


def _walk(fs: Any, root: str) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    """(folder, {file name: info}) for every folder below root; symlinks are followed."""
    if isinstance(fs, LocalFileSystem):
        return _walk_local(root)
    folders = []
    try:
        for folder, _dirs, files in fs.walk(root, detail=True):
            folders.append((folder, files))
    except (OSError, ValueError) as exc:
        log.warning("cannot list %s: %s", root, exc)
    return folders


def _walk_local(root: str) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    """fsspec's local walk does not follow symlinked folders; os.walk does (loops guarded)."""
    folders, seen = [], set()
    for folder, dirs, files in os.walk(root, followlinks=True, onerror=_log_walk_error):
        real = os.path.realpath(folder)
        if real in seen:  # a symlink loop, or the same folder reached twice
            dirs[:] = []
            continue
        seen.add(real)
        infos = {}
        for name in files:
            info = _file_info(os.path.join(folder, name), name)
            if info is not None:
                infos[name] = info
        folders.append((folder, infos))
    return folders


def _file_info(path: str, name: str) -> dict[str, Any] | None:
    """The listing entry of a regular file (links followed); None for anything else."""
    try:
        stat = os.stat(path)
    except OSError:  # dangling link, or removed since the listing
        return None
    if not stat_module.S_ISREG(stat.st_mode):  # a FIFO's read may never end
        if name.endswith((".json", ".json.gz")):
            _report_once(path, f"skipping {path}: not a regular file (a FIFO, device "
                         "or socket), never opened")
        return None
    return {"name": path, "type": "file", "size": stat.st_size, "mtime": stat.st_mtime_ns}


def _report_once(path: str, message: str) -> None:
    if path not in _reported:
        _reported.add(path)
        log.warning("torch-prof: %s", message)


def _log_walk_error(exc: OSError) -> None:
    log.warning("cannot list %s: %s", exc.filename, exc)


def _run_from_folder(fs: Any, root: str, folder: str, files: dict[str, dict[str, Any]],
                     real_root: str = "", serve_outside: bool = False) -> RunInfo | None:
    traces: dict[str, list[tuple[int | None, FileRef]]] = {}
    timelines: list[FileRef] = []
    snapshots: list[FileRef] = []
    for name in sorted(files):
        info = files[name]
        if info.get("type") not in (None, "file"):
            continue
        path = info.get("name") or posixpath.join(folder, name)
        base = posixpath.basename(path)
        if MEMORY_TIMELINE_NAME.match(base):
            if _servable(path, real_root, serve_outside):
                timelines.append(file_ref(fs, path, info, real_root, serve_outside))
            continue
        if SNAPSHOT_NAME.search(base):
            if _servable(path, real_root, serve_outside, "allocator snapshot"):
                snapshots.append(file_ref(fs, path, info, real_root, serve_outside))
            continue
        worker, timestamp = _classify(fs, path, base, info)
        if worker is not None:
            ref = file_ref(fs, path, info, real_root, serve_outside)
            traces.setdefault(worker, []).append((timestamp, ref))
    if not traces and not timelines and not snapshots:
        return None
    run = RunInfo(name=_run_name(root, folder), path=folder, memory_timelines=timelines,
                  memory_snapshots=snapshots)
    for worker, entries in sorted(traces.items()):
        run.workers[worker] = _spans(entries)
        for span in run.workers[worker]:
            span.memory_timeline = matching_timeline(span.ref.name, timelines)
            span.memory_snapshot = matching_snapshot(span.ref.name, snapshots)
    return run


def matching_snapshot(trace_name: str, snapshots: list[FileRef]) -> FileRef | None:
    """The snapshot named after a trace (`<worker>[.<ts>]` then anything, for
    `<worker>[.<ts>].pt.trace.json[.gz]`), else the run's only snapshot."""
    stem = _TRACE_SUFFIX.sub("", trace_name)
    for ref in snapshots:
        if ref.name.startswith(stem + "."):
            return ref
    return snapshots[0] if len(snapshots) == 1 else None


def matching_timeline(trace_name: str, timelines: list[FileRef]) -> FileRef | None:
    """The export written next to a trace (`<worker>[.<ts>].raw.json[.gz]` for
    `<worker>[.<ts>].pt.trace.json[.gz]`), else the only export of a run with no such pairing."""
    stem = _TRACE_SUFFIX.sub("", trace_name)
    for ref in timelines:
        if _RAW_SUFFIX.sub("", ref.name) == stem:
            return ref
    lone = len(timelines) == 1 and not _PAIRED_EXPORT.search(timelines[0].name)
    return timelines[0] if lone else None


def _servable(path: str, real_root: str, serve_outside: bool,
              kind: str = "memory export") -> bool:
    """A memory export or allocator snapshot is served as data: only from inside the logdir's
    real path, unless `serve_outside` ($TORCH_PROF_SERVE_OUTSIDE_LOGDIR=1 at the entry point;
    traces found through links are still analysed)."""
    if not real_root or serve_outside:
        return True
    if inside(os.path.realpath(path), real_root):
        return True
    _report_once(path, f"skipping the {kind} {path}: its real path is outside the "
                 f"logdir (set {SERVE_OUTSIDE_ENV}=1 to allow it)")
    return False


def _classify(fs: Any, path: str, base: str, info: dict[str, Any] | None = None
              ) -> tuple[str | None, int | None]:
    """(worker, span timestamp) for a trace file, (None, None) for anything else."""
    match = TRACE_NAME.match(base)
    if match:
        span = match.group("span")
        return match.group("worker"), int(span) if span else None
    match = OTHER_JSON_NAME.match(base)
    if match and _sniff(fs, path, info or {}):
        return match.group("worker"), None
    return None, None


def _sniff(fs: Any, path: str, info: dict[str, Any]) -> bool:
    """`looks_like_chrome_trace`, remembered per (path, size, mtime): rescans of a logdir full
    of other JSON files open none of them again."""
    key = (path, int(info.get("size") or 0), info.get("mtime"))
    if key[2] is None:
        return looks_like_chrome_trace(fs, path)
    verdict = _sniffed.get(key)
    if verdict is None:
        verdict = _sniffed[key] = looks_like_chrome_trace(fs, path)
        if len(_sniffed) > _SNIFF_MEMO_SIZE:
            _sniffed.popitem(last=False)
    return verdict


def looks_like_chrome_trace(fs: Any, path: str) -> bool:
    """Sniff the first bytes: a trace object, or the legacy autograd bare-array export."""
    try:
        with open_file(fs, path) as handle:
            head = handle.read(_SNIFF_BYTES)
    except OSError:
        return False
    if head.startswith(GZIP_MAGIC):
        head = next(iter(decompressor().feed(head, _SNIFF_BYTES)), b"")
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"{"):
        return _EVENTS_HINT in text or all(hint in text for hint in _HEADER_HINTS)
    if text.startswith(b"["):
        return bool(_LEGACY_HINT.search(text))
    return False


def _spans(entries: list[tuple[int | None, FileRef]]) -> list[SpanFile]:
    """Number a worker's files 1, 2, ... by timestamp (numerically, not as strings)."""
    timed = sorted((t, ref) for t, ref in entries if t is not None)
    spans = [SpanFile(str(i), t, ref) for i, (t, ref) in enumerate(timed, start=1)]
    untimed = [ref for t, ref in entries if t is None]
    if untimed:
        if len(untimed) > 1:
            log.warning("several untimed trace files for one worker; using %s", untimed[0].path)
        spans.append(SpanFile(DEFAULT_SPAN, None, untimed[0]))
    return spans


def _run_name(root: str, folder: str) -> str:
    rel = posixpath.relpath(folder, root) if folder != root else "."
    return posixpath.basename(root.rstrip("/")) or root if rel == "." else rel
