"""Many small files: the parser pool's batches and the scanner's cheap rescans.

Expected values come from parsing each file on its own in this process (`load_trace` without
the cache, `summarize`, `build_view`), never from the code under test.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from tb_plugin.analysis.features import summarize
from tb_plugin.cache import TraceCache
from tb_plugin.discovery import RunScanner, discover_runs
from tb_plugin.ingest.plain import from_plain
from tb_plugin.load import load_trace
from tb_plugin.output.encoding import encode_json
from tb_plugin.server.jobs import (
    BASE_MEMORY,
    BATCH_FILE_JSON_BYTES,
    BATCH_FILES,
    BATCH_JSON_BYTES,
    JobQueue,
    LoadJob,
    LoadOutcome,
)
from tb_plugin.server.pool import LoadPool, estimate_memory
from tb_plugin.settings import Settings
from tb_plugin.storage import FileRef, open_ref
from tb_plugin.views.registry import SPECS, build_view
from tests.support import SAMPLES, SHARED_TRACES, needs_shared

from .harness import OLD, make_trace, running_tensorboard, write_bytes, write_trace

BROKEN = b"this is { not json"


def _ref(size: int, key: str = "") -> FileRef:
    """A FileRef of `size` bytes (an uncompressed name: its JSON size is its size)."""
    return FileRef(None, f"/nowhere/{key or size}.pt.trace.json", size, "0")


def _job(key: str, json_bytes: int, priority: int = 0) -> LoadJob:
    ref = _ref(json_bytes, key)
    return LoadJob(key, ref, estimate_memory(ref), priority=priority)


# -- the queue's batches -------------------------------------------------------------------------


def test_a_batch_is_the_next_small_files_never_the_last_one_queued() -> None:
    queue = JobQueue()
    for i in range(5):
        queue.push(_job(f"s{i}", 1000 + i))
    batch = queue.small_batch()
    assert [j.key for j in batch] == ["s0", "s1", "s2", "s3"]  # s4: the last one, handed over
    lead = queue.take_batch(batch)
    assert lead.batch == batch and lead.estimate == BASE_MEMORY + 1003
    assert queue.pop().key == "s4"
    assert queue.pop() is None and len(queue) == 0


def test_batch_limits_files_bytes_and_which_files() -> None:
    assert estimate_memory(_ref(BATCH_FILE_JSON_BYTES)) == BASE_MEMORY + BATCH_FILE_JSON_BYTES
    queue = JobQueue()
    queue.push(_job("a", 10))
    queue.push(_job("edge", BATCH_FILE_JSON_BYTES))
    queue.push(_job("over", BATCH_FILE_JSON_BYTES + 1))
    assert [j.key for j in queue.small_batch()] == ["a", "edge"]  # stops at "over"

    queue = JobQueue()
    for i in range(BATCH_FILES + 5):
        queue.push(_job(f"f{i:03d}", 100))
    assert len(queue.small_batch()) == BATCH_FILES

    per_file = BATCH_FILE_JSON_BYTES
    fit = BATCH_JSON_BYTES // per_file  # files of the byte limit exactly
    queue = JobQueue()
    for i in range(fit + 3):
        queue.push(_job(f"b{i:03d}", per_file))
    assert len(queue.small_batch()) == fit
    for first, files in ((0, fit + 1), (1, fit)):  # the byte limit is inclusive
        queue = JobQueue()
        queue.push(_job("first", first))
        for i in range(fit + 3):
            queue.push(_job(f"c{i:03d}", per_file))
        assert len(queue.small_batch()) == files, first

    queue = JobQueue()
    queue.push(_job("wanted", 10, priority=10))  # waited for: handed over on its own
    for i in range(3):
        queue.push(_job(f"w{i}", 10))
    assert queue.small_batch() == []
    assert queue.pop().key == "wanted"
    assert [j.key for j in queue.small_batch()] == ["w0", "w1"]

    queue = JobQueue()
    retried = _job("retried", 10)
    retried.alone = True  # its batch's parser died: parsed on its own
    queue.push(retried)
    queue.push(_job("x", 20))
    assert queue.small_batch() == []


def test_bumped_and_cancelled_files_leave_no_trace_in_a_batch() -> None:
    queue = JobQueue()
    for i in range(4):
        queue.push(_job(f"k{i}", 100 + i))
    queue.remove("k1")
    assert queue.bump("k3", 10)
    assert [j.key for j in queue.small_batch()] == []  # k3 is wanted: it goes first, alone
    assert queue.pop().key == "k3"
    assert [j.key for j in queue.small_batch()] == ["k0"]  # k2 is the last one queued


# -- a real pool -------------------------------------------------------------------------------


def _tiny_files(folder: Path) -> tuple[list[Path], list[Path]]:
    """Tiny traces of several shapes, and broken ones among them (bad JSON, empty)."""
    paths = [write_trace(folder / f"gen{i}.pt.trace.json", steps=1 + i % 3, ops_per_step=2 + i,
                         kernels=i % 2 == 0, mtime=OLD) for i in range(6)]
    paths.append(write_bytes(folder / "gz.pt.trace.json.gz",
                             gzip.compress(json.dumps(make_trace(steps=2)).encode())))
    broken = [write_bytes(folder / "broken.pt.trace.json", BROKEN),
              write_bytes(folder / "empty.pt.trace.json", b"")]
    return paths[:3] + broken[:1] + paths[3:] + broken[1:], broken


def _run_pool(paths: list[Path], cache_root: Path, view_summaries: bool = True
              ) -> tuple[dict[str, LoadOutcome], int]:
    outcomes: dict[str, LoadOutcome] = {}
    done = threading.Event()

    def record(outcome: LoadOutcome) -> None:
        outcomes[outcome.key] = outcome
        if len(outcomes) == len(paths):
            done.set()

    pool = LoadPool(cache_root, lambda k: None, lambda k, f: None, record, workers=1,
                    config=Settings(parse_processes=1, load_workers=1))
    try:
        for path in paths:
            ref = open_ref(str(path))
            pool.submit(LoadJob(str(path), ref, estimate_memory(ref),
                                view_summaries=view_summaries))
        assert done.wait(120), f"{len(outcomes)} of {len(paths)} files came back"
    finally:
        pool.close()
    return outcomes, pool.parser_calls


def test_a_batch_gives_each_file_what_parsing_it_alone_gives(tmp_path: Path) -> None:
    """Each file of a batch comes back with the summary of its own parse, its table is in the
    cache (the views built from it equal those of a parse of that file alone), and the broken
    file among them costs only itself: its error, the others loaded."""
    paths, broken = _tiny_files(tmp_path / "logs")
    outcomes, calls = _run_pool(paths, tmp_path / "cache")
    assert calls < len(paths)  # batched: fewer calls than files
    cache = TraceCache(tmp_path / "cache")
    from_cache = 0
    for path in paths:
        alone = load_trace(str(path), use_cache=False)
        outcome = outcomes[str(path)]
        assert outcome.error is None and outcome.summary == summarize(alone), path.name
        # the parser wrote it to the cache, or handed it over (the last file queued)
        cached = (cache.load_table(open_ref(str(path))) if outcome.table is None
                  else from_plain(outcome.table))
        from_cache += outcome.table is None
        if path in broken:
            assert outcome.summary["state"] == "error" and outcome.summary["messages"]
            assert cached is None  # a broken file is never cached (re-read when it changes)
            continue
        assert outcome.summary["state"] == "ok"
        for view in ("overview", "operators"):
            assert encode_json(build_view(cached, view)) == \
                encode_json(build_view(alone, view)), (path.name, view)
    assert from_cache >= len(paths) - 2  # at most the first and the last handed over


@needs_shared
def test_view_summaries_are_stored_only_when_asked(tmp_path: Path) -> None:
    """A small run's files are parsed without the run-level view summaries (its view makes
    them on request); a big run's files with them (`view_summaries`)."""
    source = sorted((SHARED_TRACES / "cpu_only").glob("*.pt.trace.json.gz"))[0]  # gloo ops
    spec = SPECS["distributed"]
    for wanted in (True, False):
        folder = tmp_path / f"logs{wanted}"
        paths = []
        for i in range(4):
            folder.mkdir(parents=True, exist_ok=True)
            paths.append(folder / f"rank{i}.pt.trace.json.gz")
            shutil.copy2(source, paths[-1])
        outcomes, _ = _run_pool(paths, tmp_path / f"cache{wanted}", view_summaries=wanted)
        cache = TraceCache(tmp_path / f"cache{wanted}")
        by_parser = [p for p in paths if outcomes[str(p)].table is None]  # not handed over
        assert len(by_parser) >= 2
        for path in by_parser:
            assert outcomes[str(path)].summary["features"]["comm_ops"] > 0
            assert spec.summary_wanted(outcomes[str(path)].summary["features"])
            stored = cache.get_payload(open_ref(str(path)), spec.summary_key(),
                                       spec.summary_type)
            expected = spec.summarize(load_trace(str(path), use_cache=False))
            if wanted:  # NaN in both (unknown group sizes): compared as encoded
                assert encode_json(stored) == encode_json(expected)
            else:
                assert stored is None


# -- a real TensorBoard --------------------------------------------------------------------------


def _payload(tb: Any, route: str, **params: str) -> Any:
    reply = tb.get(route, params)
    assert reply.status == 200, (route, params, reply.body[:300])
    return reply.json()


def test_many_small_runs_load_as_parsing_each_file_alone(
        tmp_path: Path, server_env: dict[str, str]) -> None:
    """A logdir of many small runs (batched by the pool) lists every file with the state and
    event count of its own parse, the broken one with its error beside its loaded batch-mates,
    and serves the payloads a parse of each file alone gives, the run-level Distributed view of
    a small run (no precomputed summaries) included."""
    logdir = tmp_path / "logs"
    expected: dict[tuple[str, str], Any] = {}
    for run in range(4):
        for worker in range(5):
            path = write_trace(logdir / f"run{run}" / f"w{worker}.pt.trace.json",
                               steps=1 + (run + worker) % 3, ops_per_step=2 + worker, mtime=OLD)
            expected[(f"run{run}", f"w{worker}")] = load_trace(str(path), use_cache=False)
    write_bytes(logdir / "run2" / "broken.pt.trace.json", BROKEN)
    shutil.copytree(SAMPLES / "ddp_gloo", logdir / "ddp")
    env = {**server_env, "TORCH_PROF_CACHE_DIR": str(tmp_path / "cache")}
    with running_tensorboard(logdir, tmp_path / "tb.log", env) as tb:
        listing = tb.wait_loaded(timeout=240)
        runs = {r["name"]: r for r in listing["runs"]}
        assert sorted(runs) == ["ddp", "run0", "run1", "run2", "run3"]
        for (run, worker), table in expected.items():
            spans = next(w["spans"] for w in runs[run]["workers"] if w["name"] == worker)
            summary = summarize(table)
            assert [(s["state"], s["events"]) for s in spans] == \
                [(summary["state"], summary["events"])], (run, worker)
        broken = next(w["spans"] for w in runs["run2"]["workers"] if w["name"] == "broken")
        alone = load_trace(str(logdir / "run2" / "broken.pt.trace.json"), use_cache=False)
        assert broken[0]["state"] == "error"
        assert broken[0]["messages"] == list(alone.status.messages)
        assert runs["run2"]["state"] == "partial"  # its other files loaded
        for run, worker in (("run0", "w0"), ("run3", "w4"), ("run2", "w1")):
            for view in ("overview", "operators", "kernels"):
                assert _payload(tb, view, run=run, worker=worker, span="default") == \
                    json.loads(encode_json(build_view(expected[(run, worker)], view)))
        ranks = {w.name.split(".")[0]: w for w in sorted((logdir / "ddp").glob("*.trace.json.gz"))
                 if w.name.endswith(".1795260318969.pt.trace.json.gz")}
        tables = {name: load_trace(str(path), use_cache=False) for name, path in ranks.items()}
        assert _payload(tb, "distributed", run="ddp", span="1") == \
            json.loads(encode_json(build_view(tables, "distributed", {})))


# -- rescans -------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def _tree(root: Path, runs: int, files: int, mtime: float) -> None:
    for run in range(runs):
        for worker in range(files):
            write_trace(root / f"run{run}" / f"w{worker}.pt.trace.json", steps=1, mtime=mtime)
        os.utime(root / f"run{run}", (mtime, mtime))
    os.utime(root, (mtime, mtime))


def _same(a: list[Any], b: list[Any]) -> bool:
    return [(r.name, {w: [(s.span, s.ref) for s in v] for w, v in r.workers.items()})
            for r in a] == \
        [(r.name, {w: [(s.span, s.ref) for s in v] for w, v in r.workers.items()}) for r in b]


def test_an_unchanged_tree_is_not_listed_again(tmp_path: Path) -> None:
    _tree(tmp_path, 6, 3, OLD)
    clock = Clock()
    scanner = RunScanner(hot_s=60, full_s=600, clock=clock)
    first = scanner(str(tmp_path))
    assert (scanner.listed, scanner.stats) == (7, 18)  # the logdir and 6 runs; 18 files
    assert _same(first, discover_runs(str(tmp_path)))
    clock.now += 10
    again = scanner(str(tmp_path))
    assert (scanner.listed, scanner.stats) == (0, 0)
    assert all(a is b for a, b in zip(again, first)) and len(again) == len(first)


def test_new_runs_new_files_and_rewritten_files_are_still_found(tmp_path: Path) -> None:
    _tree(tmp_path, 4, 2, OLD)
    clock = Clock()
    scanner = RunScanner(hot_s=60, full_s=10_000, clock=clock)
    started = clock.now
    scanner(str(tmp_path))
    write_trace(tmp_path / "run9" / "new.pt.trace.json", steps=2, mtime=OLD)  # a new run
    write_trace(tmp_path / "run1" / "w7.pt.trace.json", steps=2, mtime=OLD)  # a new file
    clock.now += 3600  # long after: found by the folders' mtimes, not by being recent
    runs = scanner(str(tmp_path))
    assert scanner.listed == 3  # the logdir (a new entry), run9, run1
    assert _same(runs, discover_runs(str(tmp_path)))
    assert "run9" in {r.name for r in runs}

    # rewritten in place long after: the folder's mtime is unchanged; the full rescan finds it
    target = tmp_path / "run2" / "w0.pt.trace.json"
    folder_times = os.stat(tmp_path / "run2")
    with open(target, "w") as handle:
        json.dump(make_trace(steps=5), handle)
    os.utime(target, (OLD + 60, OLD + 60))
    os.utime(tmp_path / "run2", ns=(folder_times.st_atime_ns, folder_times.st_mtime_ns))
    clock.now = started + 10_000 - 1
    assert not _same(scanner(str(tmp_path)), discover_runs(str(tmp_path)))  # not yet
    assert scanner.listed == 0
    clock.now = started + 10_000  # full_s since the last full listing
    assert _same(scanner(str(tmp_path)), discover_runs(str(tmp_path)))
    assert scanner.listed == 6


def test_a_folder_being_written_is_listed_until_it_is_left_alone(tmp_path: Path) -> None:
    _tree(tmp_path, 2, 2, OLD)
    clock = Clock()
    scanner = RunScanner(hot_s=60, full_s=10_000, clock=clock)
    growing = tmp_path / "run0" / "w0.pt.trace.json"
    modified = clock.now = float(int(clock.now))  # whole seconds: exact in ns mtimes
    os.utime(growing, (modified, modified))
    folder = os.stat(tmp_path / "run0")
    scanner(str(tmp_path))
    growing.write_text(json.dumps(make_trace(steps=4)))  # grows in place
    os.utime(growing, (modified, modified))  # same mtime: the size tells
    os.utime(tmp_path / "run0", ns=(folder.st_atime_ns, folder.st_mtime_ns))
    clock.now = modified + 60 - 0.001  # still hot: listed, the new size seen
    assert _same(scanner(str(tmp_path)), discover_runs(str(tmp_path)))
    assert scanner.listed == 1 and scanner.stats == 2
    clock.now = modified + 60  # left alone for hot_s: no longer listed
    scanner(str(tmp_path))
    assert scanner.listed == 0
