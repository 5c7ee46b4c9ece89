"""Every knob of torch-prof in one place: the `TORCH_PROF_*` environment variables.

`settings()` reads them (each call reads the environment afresh: it is a handful of dict
lookups, and tests and launchers set variables after import). Every module that needs a knob
takes it from here; nothing else in the package reads `os.environ` for its own configuration.
Invalid values are logged once per read and replaced by the default, never fatal. The README's
"Configuration" table lists the same variables.

It also answers the two machine questions the sizing decisions share: how many CPUs this process
may use, and how much memory is available to new processes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

log = logging.getLogger(__name__)

CACHE_DIR_ENV = "TORCH_PROF_CACHE_DIR"
PARSE_PROCESSES_ENV = "TORCH_PROF_PARSE_PROCESSES"
LOAD_WORKERS_ENV = "TORCH_PROF_LOAD_WORKERS"
LOAD_MEMORY_ENV = "TORCH_PROF_LOAD_MEMORY_MB"
TABLE_MEMORY_ENV = "TORCH_PROF_TABLE_MEMORY_MB"
WARM_ENV = "TORCH_PROF_WARM"
CLUSTER_ENV = "TORCH_PROF_CLUSTER"
MAX_INFLATE_RATIO_ENV = "TORCH_PROF_MAX_INFLATE_RATIO"
MAX_TOKEN_ENV = "TORCH_PROF_MAX_TOKEN_MB"
PARSE_DEADLINE_ENV = "TORCH_PROF_PARSE_DEADLINE_S"
PAYLOAD_CACHE_ENV = "TORCH_PROF_PAYLOAD_CACHE_MB"
SERVE_OUTSIDE_ENV = "TORCH_PROF_SERVE_OUTSIDE_LOGDIR"
SNAPSHOT_MAX_ENV = "TORCH_PROF_SNAPSHOT_MAX_MB"
SNAPSHOT_MEMORY_ENV = "TORCH_PROF_SNAPSHOT_MEMORY_MB"
ALLOW_CAPTURE_ENV = "TORCH_PROF_ALLOW_CAPTURE"

#: Inflated bytes a gzip file may reach before the ratio limit applies (small files are free).
INFLATE_FLOOR = 256 << 20
#: Default size limit of an allocator snapshot, MB (unpickled, about five times that in memory).
DEFAULT_SNAPSHOT_MAX_MB = 1024

#: Values of $TORCH_PROF_CACHE_DIR that turn the cache off.
CACHE_OFF_VALUES = frozenset({"off", "none", "0", "false"})


@dataclass(frozen=True)
class Settings:
    #: Parsed-trace cache folder; None = the user cache dir (platformdirs); see `cache_off`.
    cache_dir: Optional[Path] = None
    #: The cache as an fsspec URL (s3://, gs://, file:// on a shared filesystem), else None.
    cache_url: Optional[str] = None
    #: $TORCH_PROF_CACHE_DIR is one of CACHE_OFF_VALUES: parse from scratch every time.
    cache_off: bool = False
    #: Processes one big local file is parsed with (1 = never split); None = the usable cores.
    parse_processes: Optional[int] = None
    #: Parser processes of the server's load pool; None = from cores and memory.
    load_workers: Optional[int] = None
    #: Memory budget of the load pool in bytes; None = half of the available memory.
    load_memory: Optional[int] = None
    #: Memory budget of the server's parsed-table LRU in bytes; None = from available memory.
    table_memory: Optional[int] = None
    #: Warm derived data (op tree, timeline index) of newly read tables in the background.
    warm: bool = True
    #: Ray cluster that parses and summarises files (ray://HOST:PORT, HOST:PORT or auto);
    #: None = the local process pool.
    cluster: Optional[str] = None
    #: A gzip file may inflate to at most this many times its size (beyond INFLATE_FLOOR).
    max_inflate_ratio: int = 100
    #: Largest single JSON token (one event, or the header before the events) in bytes.
    max_token: int = 256 << 20
    #: Seconds one file's parse may take; the events read by then are kept.
    parse_deadline_s: int = 1800
    #: Bytes of computed view payloads kept on disk per trace file (least recently used go).
    payload_cache: int = 64 << 20
    #: Serve files (downloads, memory exports) whose real path is outside the logdir.
    serve_outside_logdir: bool = False
    #: Allocator snapshots (pickles) bigger than this, bytes, are refused (bounded memory).
    snapshot_max_bytes: int = DEFAULT_SNAPSHOT_MAX_MB << 20
    #: Address space of the process that reads a snapshot, bytes (default: 1 GiB and six
    #: times `snapshot_max_bytes`): a snapshot that needs more is refused, the caller unharmed.
    snapshot_memory: int = (1 << 30) + 6 * (DEFAULT_SNAPSHOT_MAX_MB << 20)
    #: The server's `POST /capture` may write capture requests into run folders (value "1").
    allow_capture: bool = False


def settings(environ: Optional[Mapping[str, str]] = None) -> Settings:
    """The settings from `environ` (default: the process environment)."""
    env = os.environ if environ is None else environ
    cache = env.get(CACHE_DIR_ENV, "").strip()
    megabytes = {name: _positive_int(env, name) for name in (LOAD_MEMORY_ENV, TABLE_MEMORY_ENV)}
    url = cache if "://" in cache else None
    snapshot_max = (_positive_int(env, SNAPSHOT_MAX_ENV) or DEFAULT_SNAPSHOT_MAX_MB) << 20
    return Settings(
        cache_dir=Path(cache).expanduser() if cache and not url
        and cache.lower() not in CACHE_OFF_VALUES else None,
        cache_url=url,
        cache_off=cache.lower() in CACHE_OFF_VALUES,
        parse_processes=_positive_int(env, PARSE_PROCESSES_ENV),
        load_workers=_positive_int(env, LOAD_WORKERS_ENV),
        load_memory=_megabytes(megabytes[LOAD_MEMORY_ENV]),
        table_memory=_megabytes(megabytes[TABLE_MEMORY_ENV]),
        warm=env.get(WARM_ENV, "").strip() != "0",
        cluster=env.get(CLUSTER_ENV, "").strip() or None,
        max_inflate_ratio=_positive_int(env, MAX_INFLATE_RATIO_ENV) or 100,
        max_token=_megabytes(_positive_int(env, MAX_TOKEN_ENV)) or 256 << 20,
        parse_deadline_s=_positive_int(env, PARSE_DEADLINE_ENV) or 1800,
        payload_cache=_megabytes(_positive_int(env, PAYLOAD_CACHE_ENV)) or 64 << 20,
        serve_outside_logdir=env.get(SERVE_OUTSIDE_ENV, "").strip() == "1",
        snapshot_max_bytes=snapshot_max,
        snapshot_memory=_megabytes(_positive_int(env, SNAPSHOT_MEMORY_ENV))
        or (1 << 30) + 6 * snapshot_max,
        allow_capture=env.get(ALLOW_CAPTURE_ENV, "").strip() == "1",
    )


def _positive_int(env: Mapping[str, str], name: str) -> Optional[int]:
    value = env.get(name, "").strip()
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        log.warning("ignoring %s=%r: not a positive integer", name, value)
        return None
    return number


def _megabytes(value: Optional[int]) -> Optional[int]:
    return None if value is None else value << 20


# -- the machine -----------------------------------------------------------------------------


def usable_cpus() -> int:
    """CPUs this process may run on (taskset, cgroup cpusets), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def available_memory() -> Optional[int]:
    """Bytes of memory available to new processes now (MemAvailable on Linux), None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None
