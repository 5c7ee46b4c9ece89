"""Many small files: the parser pool's batches and the scanner's cheap rescans.

Expected values come from parsing each file on its own in this process (`load_trace` without
the cache, `summarize`, `build_view`), never from the code under test.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
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
from tb_plugin.server.catalog import RUN_SUMMARIES_MIN_FILES
from tb_plugin.server.filestate import USABLE, WRITE_GRACE_S, run_json
from tb_plugin.server.jobs import (
    BASE_MEMORY,
    BATCH_FILE_JSON_BYTES,
    BATCH_FILES,
    BATCH_JSON_BYTES,
    TABLE_MIN_JSON_BYTES,
    JobQueue,
    LoadJob,
    LoadOutcome,
)
from tb_plugin.server.listing import USABLE_RUNS_SEEN
from tb_plugin.server.parse_child import peek_summary
from tb_plugin.server.pool import LoadPool, estimate_memory
from tb_plugin.server.store import RunStore
from tb_plugin.settings import Settings
from tb_plugin.storage import FileRef, open_ref
from tb_plugin.views.registry import SPECS, build_view
from tb_plugin.views.tabs import VIEWS, RunFacts
from tb_plugin.workers import WORKER_NAME
from tests.support import SAMPLES, SHARED_TRACES, needs_shared
from tests.support.processes import children_of

from .harness import OLD, make_trace, running_tensorboard, write_bytes, write_trace
from .test_units import RecordingPool

BROKEN = b"this is { not json"

#: The default settings (max_inflate_ratio 100), passed in as the server passes its own.
CONFIG = Settings()


def _ref(size: int, key: str = "") -> FileRef:
    """A FileRef of `size` bytes (an uncompressed name: its JSON size is its size)."""
    return FileRef(None, f"/nowhere/{key or size}.pt.trace.json", size, "0")


def _job(key: str, json_bytes: int, priority: int = 0) -> LoadJob:
    ref = _ref(json_bytes, key)
    return LoadJob(key, ref, estimate_memory(ref, CONFIG), priority=priority)


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
    edge = _ref(BATCH_FILE_JSON_BYTES)
    assert estimate_memory(edge, CONFIG) == BASE_MEMORY + BATCH_FILE_JSON_BYTES
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


def _sized(path: Path, size: int) -> Path:
    """A valid trace of exactly `size` bytes (JSON padded with trailing spaces)."""
    data = json.dumps(make_trace(steps=2, ops_per_step=3)).encode()
    assert len(data) <= size
    return write_bytes(path, data + b" " * (size - len(data)))


def _tiny_files(folder: Path) -> tuple[list[Path], list[Path]]:
    """Tiny traces of several shapes, two at the size from which a batch caches the table,
    and broken ones among them (bad JSON, empty)."""
    paths = [write_trace(folder / f"gen{i}.pt.trace.json", steps=1 + i % 3, ops_per_step=2 + i,
                         kernels=i % 2 == 0, mtime=OLD) for i in range(6)]
    paths.append(write_bytes(folder / "gz.pt.trace.json.gz",
                             gzip.compress(json.dumps(make_trace(steps=2)).encode())))
    broken = [write_bytes(folder / "broken.pt.trace.json", BROKEN),
              write_bytes(folder / "empty.pt.trace.json", b"")]
    paths += [_sized(folder / "below.pt.trace.json", TABLE_MIN_JSON_BYTES - 1),
              _sized(folder / "at.pt.trace.json", TABLE_MIN_JSON_BYTES)]
    biggest = _sized(folder / "biggest.pt.trace.json", TABLE_MIN_JSON_BYTES + 4096)
    return paths[:3] + broken[:1] + paths[3:] + broken[1:] + [biggest], broken


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
            pool.submit(LoadJob(str(path), ref, estimate_memory(ref, CONFIG),
                                view_summaries=view_summaries))
        assert done.wait(120), f"{len(outcomes)} of {len(paths)} files came back"
    finally:
        pool.close()
    return outcomes, pool.parser_calls


def test_a_batch_gives_each_file_what_parsing_it_alone_gives(tmp_path: Path) -> None:
    """Each file of a batch comes back with the summary of its own parse, stored in the cache
    (a restarted server knows it without parsing); its table is in the cache from
    `TABLE_MIN_JSON_BYTES` of JSON on (the views built from it equal those of a parse of that
    file alone), and not below (a view parses it again); the broken files among them cost
    only themselves: their errors, the others loaded."""
    paths, broken = _tiny_files(tmp_path / "logs")
    outcomes, calls = _run_pool(paths, tmp_path / "cache")
    assert calls < len(paths)  # batched: fewer calls than files
    cache = TraceCache(tmp_path / "cache")
    by_parser = [p for p in paths if outcomes[str(p)].table is None]  # not handed over
    assert len(by_parser) >= len(paths) - 2  # at most the first and the last one queued
    for path in paths:
        alone = load_trace(str(path), use_cache=False)
        outcome = outcomes[str(path)]
        assert outcome.error is None and outcome.summary == summarize(alone), path.name
        if path in broken:
            assert outcome.summary["state"] == "error" and outcome.summary["messages"]
            continue
        assert outcome.summary["state"] == "ok"
        if path not in by_parser:  # handed over: the server keeps and writes it
            table = from_plain(outcome.table)
        else:
            assert peek_summary(cache, open_ref(str(path))) == outcome.summary
            table = cache.load_table(open_ref(str(path)))
            if os.path.getsize(path) < TABLE_MIN_JSON_BYTES:
                assert table is None, path.name
                continue
        for view in ("overview", "operators"):
            assert encode_json(build_view(table, view)) == \
                encode_json(build_view(alone, view)), (path.name, view)
    assert {p.name for p in by_parser} >= {"below.pt.trace.json", "at.pt.trace.json"}
    for path in broken:  # never cached (re-read when it changes)
        assert cache.load_table(open_ref(str(path))) is None
        assert peek_summary(cache, open_ref(str(path))) is None


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
    clock.now += 590 - 0.001
    scanner(str(tmp_path))
    assert scanner.listed == 0
    clock.now += 0.001  # full_s after the first scan: everything is listed again...
    again = scanner(str(tmp_path))
    assert (scanner.listed, scanner.stats) == (7, 18)
    # ... and found as it was: the same runs (the catalogue has nothing to apply)
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


# -- the /runs listing -------------------------------------------------------------------------


def _listing_store(logdir: Path, cache: Path, pools: list[RecordingPool], clock: Clock
                   ) -> RunStore:
    def make_pool(*args: Any) -> RecordingPool:
        pools.append(RecordingPool(*args))
        return pools[-1]

    store = RunStore(str(logdir), cache=TraceCache(cache), config=Settings(),
                     pool_factory=make_pool, clock=clock)
    store.start()
    assert store.wait_first_scan(60)
    return store


def _rebuilt(store: RunStore, now: float) -> list[dict[str, Any]]:
    """The listing built from scratch (`run_json` for every run), the oracle."""
    runs = store._catalog._runs
    usable = sum(any(f.report(now)[0] in USABLE for f in run.files()) for run in runs.values())
    return [run_json(run, now, usable) for _, run in sorted(runs.items())]


def test_kept_run_reports_follow_every_change(tmp_path: Path) -> None:
    """The listing kept between polls equals the one built from scratch after each parse
    outcome, and a file that may still be being written turns from loading to broken when its
    grace ends, with no outcome in between (its run's report is never kept)."""
    logdir = tmp_path / "logs"
    shutil.copytree(SAMPLES / "ddp_gloo", logdir / "ddp")
    for run in range(3):
        for worker in range(2):
            write_trace(logdir / f"run{run}" / f"w{worker}.pt.trace.json", mtime=OLD)
    clock = Clock()
    write_bytes(logdir / "run1" / "cut.pt.trace.json", b"",  # just created
                          mtime=clock.now)
    pools: list[RecordingPool] = []
    store = _listing_store(logdir, tmp_path / "cache", pools, clock)
    try:
        assert store.listing()["runs"] == _rebuilt(store, clock.now)
        assert store.listing()["loading"]
        states = {str(p): store._catalog._by_identity[k] for k in pools[0].submitted
                  for p in [store._catalog._by_identity[k].ref.path]}
        for path, state in sorted(states.items()):
            table = load_trace(path, use_cache=False)
            pools[0].on_done(LoadOutcome(state.identity, summary=summarize(table)))
            assert store.listing()["runs"] == _rebuilt(store, clock.now), path
        run1 = next(r for r in store.listing()["runs"] if r["name"] == "run1")
        cut = next(w for w in run1["workers"] if w["name"] == "cut")["spans"][0]
        assert cut["state"] == "loading" and store.listing()["loading"]
        clock.now += WRITE_GRACE_S  # no outcome, no scan: only the time changed
        listing = store.listing()
        assert listing["runs"] == _rebuilt(store, clock.now)
        run1 = next(r for r in listing["runs"] if r["name"] == "run1")
        assert next(w for w in run1["workers"] if w["name"] == "cut")["spans"][0]["state"] == \
            "error"
        assert not listing["loading"]
    finally:
        store.close()


def test_run_level_views_see_no_difference_past_the_usable_runs_kept() -> None:
    """`listing.USABLE_RUNS_SEEN`: every run-level predicate answers the same for any count of
    usable runs from it on (the kept views are shared by those counts), and differs below it
    for Diff (so the count is not simply ignored)."""
    tables = [load_trace(str(p), use_cache=False)
              for p in sorted(SAMPLES.rglob("*.pt.trace.json.gz"))]
    feature_sets = [[summarize(t)["features"]] for t in tables] + \
        [[summarize(t)["features"] for t in tables]]
    for files in feature_sets:
        for view in VIEWS.values():
            if view.run_available is None:
                continue
            answers = {view.run_available(files, RunFacts(usable_runs=n, trace_files=len(files)))
                       for n in (USABLE_RUNS_SEEN, USABLE_RUNS_SEEN + 1, 50, 10_000)}
            assert len(answers) == 1, view.name
    diff = VIEWS["Diff"]
    one = feature_sets[0]
    assert not diff.run_available(one, RunFacts(usable_runs=USABLE_RUNS_SEEN - 1))
    assert diff.run_available(one, RunFacts(usable_runs=USABLE_RUNS_SEEN))


def _feed(fifo: Path, data: bytes, done: threading.Event, deadline: float) -> None:
    """Give `data` to each reader that opens the FIFO (the parser may open it more than once)
    until `done` is set; polls for a reader every 50 ms (an observable state, not a delay)."""
    while not done.wait(0.05) and time.monotonic() < deadline:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # no reader (yet, or any more)
            continue
        try:
            os.write(fd, data)  # fits the pipe's buffer: never blocks
        except BrokenPipeError:  # the reader closed it meanwhile
            pass
        finally:
            os.close(fd)


def test_a_batch_whose_parser_dies_is_parsed_again_file_by_file(tmp_path: Path) -> None:
    """The parser process of a batch is killed while it reads one file of the batch (a FIFO
    nobody writes yet): every file of that batch is queued again on its own, and comes back
    with what parsing it alone gives; none is reported broken for its batch-mate's crash."""
    folder = tmp_path / "logs"
    paths = [write_trace(folder / f"f{i}.pt.trace.json", steps=1 + i % 3, mtime=OLD)
             for i in range(6)]
    fifo = folder / "a-fifo.pt.trace.json"
    os.mkfifo(fifo)
    data = json.dumps(make_trace(steps=2)).encode()
    starts: list[str] = []
    started = threading.Condition()
    outcomes: dict[str, LoadOutcome] = {}
    done = threading.Event()

    def on_start(key: str) -> None:
        with started:
            starts.append(key)
            started.notify_all()

    def record(outcome: LoadOutcome) -> None:
        outcomes[outcome.key] = outcome
        if len(outcomes) == len(paths) + 1:
            done.set()

    def started_times(key: str, times: int) -> None:
        with started:
            assert started.wait_for(lambda: starts.count(key) >= times, 60), starts

    pool = LoadPool(tmp_path / "cache", on_start, lambda k, f: None, record, workers=1,
                    config=Settings(parse_processes=1, load_workers=1))
    try:
        first = open_ref(str(paths[0]))
        pool.submit(LoadJob("first", first, estimate_memory(first, CONFIG)))  # alone, handed over
        started_times("first", 1)
        for path in [*paths[1:], fifo]:
            ref = open_ref(str(path))
            pool.submit(LoadJob(str(path), ref, estimate_memory(ref, CONFIG)))
        started_times(str(fifo), 1)  # the smallest (0 bytes): first of the batch
        workers = [p for p in children_of(os.getpid())
                   if WORKER_NAME in Path(f"/proc/{p}/cmdline").read_text()]
        assert len(workers) == 1
        os.kill(workers[0], signal.SIGKILL)
        started_times(str(fifo), 2)  # queued again, on its own
        _feed(fifo, data, done, deadline=time.monotonic() + 120)
        assert done.is_set(), sorted(outcomes)
    finally:
        pool.close()
    for path in paths[1:]:
        expected = summarize(load_trace(str(path), use_cache=False))
        assert outcomes[str(path)].error is None, path.name
        assert outcomes[str(path)].summary == expected, path.name
    # the FIFO itself (0 bytes when listed) is read again too: not blamed for the crash
    assert "parser process" not in (outcomes[str(fifo)].error or "")
    # one parser process: what started before the FIFO's retry was the first file, then the
    # batch (the pool's thread reports a batch's starts before it sees its parser die)
    retry = [i for i, k in enumerate(starts) if k == str(fifo)][1]
    in_batch = set(starts[1:retry])
    assert str(fifo) in in_batch and len(in_batch) >= 2  # the FIFO and batch-mates
    assert all(starts.count(k) == 2 for k in in_batch)  # each parsed again, on its own


class JobsPool(RecordingPool):
    """A `RecordingPool` that keeps the jobs submitted (what the catalogue asked for)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.jobs: list[LoadJob] = []

    def submit(self, job: LoadJob) -> None:
        super().submit(job)
        self.jobs.append(job)


def test_rank_summaries_are_precomputed_from_runs_of_16_files(tmp_path: Path) -> None:
    """`catalog.RUN_SUMMARIES_MIN_FILES`: the files of a run of that many trace files are
    parsed with the run-level view summaries, those of a run of one file fewer without."""
    logdir = tmp_path / "logs"
    for run, files in (("small", RUN_SUMMARIES_MIN_FILES - 1), ("big", RUN_SUMMARIES_MIN_FILES)):
        for rank in range(files):
            write_trace(logdir / run / f"rank{rank}.pt.trace.json", steps=1, mtime=OLD)
    pools: list[JobsPool] = []

    def make_pool(*args: Any) -> JobsPool:
        pools.append(JobsPool(*args))
        return pools[-1]

    store = RunStore(str(logdir), cache=TraceCache(tmp_path / "cache"), config=Settings(),
                     pool_factory=make_pool)
    store.start()
    try:
        assert store.wait_first_scan(60)
        flags: dict[str, set[bool]] = {}
        for job in pools[0].jobs:
            flags.setdefault(Path(job.ref.path).parent.name, set()).add(job.view_summaries)
        assert flags == {"small": {False}, "big": {True}}
        assert len(pools[0].jobs) == 2 * RUN_SUMMARIES_MIN_FILES - 1
    finally:
        store.close()
