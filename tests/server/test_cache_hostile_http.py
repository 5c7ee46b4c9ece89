"""Issue 32 through a real TensorBoard: a cache, shared (file://) or local, whose per-file
summaries, view summaries and a view payload were tampered with before the server started (a
depth bomb, a FIFO, a symlink to /dev/zero). Before the fix, the depth bomb left that file and
every file scheduled after it "queued" forever, the FIFO froze the scan (every lookup then
waited for the first scan), and a nested view payload answered 500 on every request. Now each
bad entry is recomputed: every file ends parsed with its own event count, the Distributed view
(built from the per-rank summaries) and the Overview answer what the registry builds from
freshly parsed tables, and 200 distinct `top_n` keep the payloads within the budget."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tb_plugin.cache import TraceCache, cache_location
from tb_plugin.discovery import RunInfo, discover_runs
from tb_plugin.load import load_trace
from tb_plugin.output.encoding import plain
from tb_plugin.server.parse_child import SUMMARY_KEY
from tb_plugin.server.parse_store import parse_into_cache
from tb_plugin.views.options import read_options
from tb_plugin.views.registry import SPECS, build_view
from tests.cluster.ranks import write_run
from tests.support import SAMPLES
from tests.support.hostile import deep

from .harness import TensorBoard, require_entry_point, running_tensorboard

RANKS = 5


@dataclass
class Tampered:
    tb: TensorBoard
    logs: Path
    cache: Path
    overview_bomb: Path  # the cached Overview payload of OVERVIEW_WORKER, a depth bomb

OVERVIEW_WORKER = f"host0_rank{RANKS - 1}"


def _payloads(root: Path) -> set[Path]:
    return set(root.rglob("payloads/*.json"))


def _stored_key(path: Path) -> str:
    return json.loads(path.read_bytes())["key"]


def _populate(logs: Path, cache_root: str, folder: Path) -> list[dict[str, Path]]:
    """Parse every rank into the cache as a parser process does (table, summary, view
    summaries); per rank (in discovery order), its summary's and its Distributed summary's
    files."""
    run = _job_info(logs)
    files = []
    for worker in sorted(run.workers):
        ref = run.workers[worker][0].ref
        before = _payloads(folder)
        parse_into_cache(ref.identity(), ref, cache_root)
        by_key = {_stored_key(p): p for p in _payloads(folder) - before}
        files.append({"summary": by_key[SUMMARY_KEY],
                      "distributed": by_key[SPECS["distributed"].summary_key()]})
    return files


def overview_key() -> str:
    """The key the server stores the Overview payload under (default options)."""
    spec = SPECS["overview"]
    return spec.payload_key(read_options(spec.options, lambda name: None))


def _nested_overview(cache: TraceCache, logs: Path, folder: Path) -> Path:
    """The last rank's cached Overview payload, as the server stores it, made a depth bomb."""
    ref = _job_info(logs).span_file(OVERVIEW_WORKER, "1").ref
    before = _payloads(folder)
    cache.payload(ref, overview_key(), lambda: {"stored": True})
    (path,) = _payloads(folder) - before
    path.write_bytes(deep(100_000))
    return path


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _zero(path: Path) -> None:
    path.unlink()
    os.symlink("/dev/zero", path)


@pytest.fixture(scope="module", params=["shared", "local"])
def tampered(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Tampered]:
    require_entry_point()
    root = tmp_path_factory.mktemp(f"cache-hostile-{request.param}")
    logs, folder = root / "logs", root / "cache"
    write_run(logs, RANKS)
    shutil.copytree(SAMPLES / "cnn_bs32", logs / "good")  # big payloads, for the budget
    cache_root = f"file://{folder}" if request.param == "shared" else str(folder)
    files = _populate(logs, cache_root, folder)
    files[0]["summary"].write_bytes(deep(100_000))  # first: every later file hung behind it
    _fifo(files[1]["summary"])
    _zero(files[2]["summary"])
    files[3]["distributed"].write_bytes(deep(100_000))
    _fifo(files[4]["distributed"])
    bomb = _nested_overview(TraceCache(cache_location(cache_root)), logs, folder)
    env = dict(os.environ, TORCH_PROF_CACHE_DIR=cache_root, TORCH_PROF_LOAD_WORKERS="2",
               TORCH_PROF_PAYLOAD_CACHE_MB="1", PYTHONUNBUFFERED="1")
    with running_tensorboard(logs, root / "tb.log", env) as tb:
        yield Tampered(tb, logs, folder, bomb)


def _job_info(logs: Path) -> RunInfo:
    return next(run for run in discover_runs(str(logs)) if run.name == "job")


def _job(listing: dict[str, Any]) -> dict[str, Any]:
    return next(run for run in listing["runs"] if run["name"] == "job")


def _events(path: Path) -> int:
    return len(json.loads(path.read_bytes())["traceEvents"])


def test_every_file_is_parsed_despite_its_cached_summary(tampered: Tampered
                                                          ) -> None:
    tb, logs = tampered.tb, tampered.logs
    listing = tb.wait_loaded(timeout=240)  # polls /runs; each answer comes from a live scan
    run = _job(listing)
    info = _job_info(logs)
    expected = {worker: ("ok", _events(Path(info.workers[worker][0].ref.path)))
                for worker in info.workers}
    assert len(expected) == RANKS
    assert {w["name"]: (w["spans"][0]["state"], w["spans"][0]["events"])
            for w in run["workers"]} == expected


def test_distributed_view_recomputes_bad_view_summaries(tampered: Tampered
                                                        ) -> None:
    tb, logs = tampered.tb, tampered.logs
    listing = tb.wait_loaded(timeout=240)
    run = _job(listing)
    span = run["workers"][0]["spans"][0]["span"]
    reply = tb.get("distributed", {"run": run["name"], "span": span})
    assert reply.status == 200, reply.body[:500]
    info = _job_info(logs)
    uncached = TraceCache(None)
    tables = {worker: load_trace(info.span_file(worker, span).ref, cache=uncached)
              for worker in info.workers}
    expected: Any = plain(build_view(tables, "distributed", {}))
    assert reply.json() == expected
    assert sorted(expected["workers"]) == sorted(info.workers)  # all five ranks, none skipped


def test_payloads_stay_within_the_budget(tampered: Tampered) -> None:
    """3,000 distinct `top_n` once wrote 3,001 files to a shared cache: the budget (1 MB here)
    holds there as it does locally."""
    tb, folder = tampered.tb, tampered.cache
    listing = tb.wait_loaded(timeout=240)
    good = next(run for run in listing["runs"] if run["name"] == "good")
    worker = good["workers"][0]
    params = {"run": "good", "worker": worker["name"], "span": worker["spans"][0]["span"]}
    for top_n in range(1, 201):  # each a new payload file
        assert tb.get("operators/pies", {**params, "top_n": top_n}).status == 200
    by_folder: dict[Path, list[int]] = {}
    for path in _payloads(folder):
        if not path.name.startswith("pinned-"):  # the per-file summaries stay
            by_folder.setdefault(path.parent, []).append(path.stat().st_size)
    largest = max(by_folder.values(), key=sum)
    assert sum(largest) <= (1 << 20) + max(largest), sum(largest)  # the budget, plus the newest
    assert len(largest) < 200  # 200 distinct payloads were written to that folder: evicted


def test_a_nested_cached_view_payload_is_recomputed(tampered: Tampered
                                                    ) -> None:
    tb, logs = tampered.tb, tampered.logs
    tb.wait_loaded(timeout=240)
    reply = tb.get("overview", {"run": "job", "worker": OVERVIEW_WORKER, "span": "1"})
    assert reply.status == 200, reply.body[:500]
    ref = _job_info(logs).span_file(OVERVIEW_WORKER, "1").ref
    assert reply.json() == plain(build_view(load_trace(ref, cache=TraceCache(None)),
                                            "overview"))
    # the bomb was read (the same key) and replaced by the recomputed payload
    assert _stored_key(tampered.overview_bomb) == overview_key()
