"""Settings are read once by the entry point and passed down (issue #31 item 6): below the
entry, a setting passed in wins over the `TORCH_PROF_*` environment, on both sides, and the
entry points (the CLI's cache, the Python API, the MCP tools) read the environment once."""

from __future__ import annotations

import argparse
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tb_plugin.api import open_logdir
from tb_plugin.batch import summarise_file, summarise_files
from tb_plugin.cache import TraceCache
from tb_plugin.cli_common import cache_of
from tb_plugin.discovery import RunScanner, discover_run, discover_runs
from tb_plugin.executors import InlineExecutor
from tb_plugin.ingest import parse_trace
from tb_plugin.ingest.parse import Limits
from tb_plugin.load import load_trace
from tb_plugin.mcp_server import Tools
from tb_plugin.server.parse_child import parse_file
from tb_plugin.server.parse_store import parse_batch_into_cache, parse_into_cache
from tb_plugin.settings import (
    INFLATE_FLOOR,
    MAX_INFLATE_RATIO_ENV,
    MAX_TOKEN_ENV,
    PAYLOAD_CACHE_ENV,
    SERVE_OUTSIDE_ENV,
    Settings,
)
from tb_plugin.storage import OutsideLogdir, check_servable, open_ref, open_to_serve
from tests.cluster.ranks import write_rank
from tests.support.hostile import write

TRACE = b'{"traceEvents": []}'


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """A logdir whose run `run` has a trace inside it, a trace linked from outside it and a
    memory export linked from outside it; run `exports` has only such a linked export."""
    outside = write(tmp_path / "secret" / "data.json", TRACE)
    logs = tmp_path / "logs"
    write(logs / "run" / "real.pt.trace.json", TRACE)
    os.symlink(outside, logs / "run" / "link.pt.trace.json")
    os.symlink(outside, logs / "run" / "w.raw.json.gz")
    (logs / "exports").mkdir()
    os.symlink(outside, logs / "exports" / "w.raw.json.gz")
    return logs


# -- storage and discovery: serve_outside_logdir ------------------------------------------------


def test_discovery_refuses_outside_files_unless_passed_even_with_the_variable_set(
        logs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SERVE_OUTSIDE_ENV, "1")  # ignored below the entry point
    for run in (discover_runs(str(logs))[0], discover_run(str(logs), "run"),
                RunScanner()(str(logs))[0]):
        assert run is not None and run.name == "run" and run.memory_timelines == []
        link = run.workers["link"][0].ref
        with pytest.raises(OutsideLogdir):
            open_to_serve(link)
        with pytest.raises(OutsideLogdir):
            check_servable(link)
        with open_to_serve(run.workers["real"][0].ref) as handle:
            assert handle.read() == TRACE
    assert [r.name for r in discover_runs(str(logs))] == ["run"]  # `exports` has nothing


def test_discovery_serves_outside_files_when_passed_with_the_variable_unset(
        logs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SERVE_OUTSIDE_ENV, raising=False)
    for run in (discover_runs(str(logs), serve_outside_logdir=True)[1],
                discover_run(str(logs), "run", serve_outside_logdir=True),
                RunScanner(serve_outside_logdir=True)(str(logs))[1]):
        assert run is not None and run.name == "run"
        assert [ref.name for ref in run.memory_timelines] == ["w.raw.json.gz"]
        link = run.workers["link"][0].ref
        check_servable(link)  # no error
        with open_to_serve(link) as handle:
            assert handle.read() == TRACE
    assert [r.name for r in discover_runs(str(logs), serve_outside_logdir=True)] == [
        "exports", "run"]


# -- the cache: payload budget and entry limit ---------------------------------------------------


@pytest.fixture
def ref(tmp_path: Path):
    (tmp_path / "ranks").mkdir()
    return open_ref(str(write_rank(tmp_path / "ranks", 1, 4)))


def _fill(cache: TraceCache, ref, root: Path) -> list[int]:
    """31 payloads of 100 KiB (+ the JSON wrapper); the sizes of the files kept."""
    blob = "x" * (100 << 10)
    for i in range(31):
        cache.payload(ref, f"p{i}", lambda: blob)
    return [p.stat().st_size for p in next(root.rglob("payloads")).glob("*.json")]


def test_the_payload_budget_passed_in_wins_over_the_variable(
        tmp_path: Path, ref, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PAYLOAD_CACHE_ENV, "1000")  # 1000 MB: would keep all 31
    sizes = _fill(TraceCache(tmp_path / "a", Settings(payload_cache=1 << 20)), ref, tmp_path / "a")
    assert sum(sizes) <= 1 << 20 and len(sizes) == 10  # ten ~100 KiB files fit in 1 MiB
    monkeypatch.setenv(PAYLOAD_CACHE_ENV, "1")  # 1 MB: would keep 10
    sizes = _fill(TraceCache(tmp_path / "b", Settings()), ref, tmp_path / "b")  # 64 MiB
    assert len(sizes) == 31


def test_the_inflate_ratio_passed_in_sets_the_entry_limit(
        tmp_path: Path, ref, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(MAX_INFLATE_RATIO_ENV, "1000000")
    cache = TraceCache(tmp_path / "local", Settings(max_inflate_ratio=1))
    limit = ref.size + (64 << 20)  # ratio 1 times the trace's size, plus 64 MiB
    assert cache.entry_limit(ref) == limit
    assert TraceCache(None, Settings()).entry_limit(ref) == 100 * ref.size + (64 << 20)
    for unpacked, refused in ((limit, False), (limit + 1, True)):
        cache.save_table(ref, parse_trace(ref))
        (columns,) = (tmp_path / "local").rglob("columns.npz")
        np.savez_compressed(columns, a=np.zeros(unpacked - 128, dtype=np.uint8))
        with zipfile.ZipFile(columns) as archive:
            assert sum(info.file_size for info in archive.infolist()) == unpacked
        caplog.clear()
        assert cache.load_table(ref) is None  # not a table either way
        assert ("over the entry limit" in caplog.text) is refused, caplog.text


def test_a_cache_opened_without_settings_reads_the_environment_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PAYLOAD_CACHE_ENV, "3")
    cache = TraceCache(tmp_path)
    monkeypatch.setenv(PAYLOAD_CACHE_ENV, "5")  # later changes do not reach it
    assert cache.config.payload_cache == 3 << 20


# -- the entry points read the environment once and pass it down --------------------------------


def test_the_cli_cache_carries_the_environment_read_at_the_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PAYLOAD_CACHE_ENV, "3")
    monkeypatch.setenv(SERVE_OUTSIDE_ENV, "1")
    for no_cache, cache_dir in ((True, None), (False, str(tmp_path))):
        cache = cache_of(argparse.Namespace(no_cache=no_cache, cache_dir=cache_dir))
        assert cache.config.payload_cache == 3 << 20 and cache.config.serve_outside_logdir


def test_the_python_api_takes_settings_else_reads_the_environment(
        logs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SERVE_OUTSIDE_ENV, raising=False)
    allowed = Settings(serve_outside_logdir=True)
    assert open_logdir(str(logs), use_cache=False, config=allowed).runs() == ["exports", "run"]
    assert open_logdir(str(logs), use_cache=False).runs() == ["run"]
    monkeypatch.setenv(SERVE_OUTSIDE_ENV, "1")
    assert open_logdir(str(logs), use_cache=False).runs() == ["exports", "run"]
    assert open_logdir(str(logs), use_cache=False, config=Settings()).runs() == ["run"]


def test_the_mcp_tools_list_what_the_cache_settings_allow(
        logs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SERVE_OUTSIDE_ENV, "1")
    refused = Tools(str(logs), TraceCache(None, Settings())).list_runs()["runs"]
    assert [(r["name"], r["memory_timelines"]) for r in refused] == [("run", [])]
    monkeypatch.delenv(SERVE_OUTSIDE_ENV)
    allowed = Tools(str(logs), TraceCache(None, Settings(serve_outside_logdir=True)))
    assert [(r["name"], r["memory_timelines"]) for r in allowed.list_runs()["runs"]] == [
        ("exports", ["w.raw.json.gz"]), ("run", ["w.raw.json.gz"])]


# -- the parse: limits ---------------------------------------------------------------------------

MB = 1 << 20


def _token_trace(path: Path) -> Path:
    """10 small events, one of ~2 MiB (a token over a 1 MiB limit), then 10 more."""
    small = [b'{"ph": "X", "name": "op%d", "ts": %d, "dur": 1, "pid": 1, "tid": 1}' % (i, i)
             for i in range(20)]
    huge = b'{"ph": "X", "name": "huge", "ts": 50, "dur": 1, "pid": 1, "tid": 1, "args": ' \
        b'{"s": "' + b"x" * (2 * MB) + b'"}}'
    path.write_bytes(b'{"traceEvents": [' + b", ".join([*small[:10], huge, *small[10:]]) + b"]}")
    return path


def test_the_token_limit_passed_in_wins_over_the_variable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = open_ref(str(_token_trace(tmp_path / "w.pt.trace.json")))
    monkeypatch.setenv(MAX_TOKEN_ENV, "1000")
    tight = Settings(max_token=MB)
    for table in (parse_trace(ref, processes=1, config=tight),
                  load_trace(ref, cache=TraceCache(None, tight), processes=1)):
        assert (table.status.state, table.event_count) == ("truncated", 10)
        assert "TORCH_PROF_MAX_TOKEN_MB=1" in " ".join(table.status.messages)
    monkeypatch.setenv(MAX_TOKEN_ENV, "1")
    for table in (parse_trace(ref, processes=1, config=Settings()),
                  load_trace(ref, cache=TraceCache(None, Settings()), processes=1)):
        assert table.event_count == 21 and table.status.state != "truncated"
    assert parse_trace(ref, processes=1).event_count == 10  # no settings given: read here


def test_parse_limits_come_from_the_settings_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_INFLATE_RATIO_ENV, "1000000")
    seven = Settings(max_inflate_ratio=7, max_token=3 * MB, parse_deadline_s=9)
    assert Limits.for_file(100 * MB, seven) == Limits(700 * MB, 3 * MB, 9.0, 7)
    assert Limits.for_file(INFLATE_FLOOR // 7, seven).max_bytes == INFLATE_FLOOR  # the floor
    assert Limits.for_file(INFLATE_FLOOR // 7 + 1, seven).max_bytes == 7 * (
        INFLATE_FLOOR // 7 + 1)
    assert Limits.for_file(0, seven).max_bytes == 1 << 62  # size unknown: no ratio
    assert Limits.for_file(100 * MB) == Limits(10000 * MB, 256 * MB, 1800.0, 100)  # defaults


def test_the_server_parsers_use_the_settings_the_pool_passes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = open_ref(str(_token_trace(tmp_path / "w.pt.trace.json")))
    monkeypatch.setenv(MAX_TOKEN_ENV, "1000")
    tight, root = Settings(max_token=MB), str(tmp_path / "cache")
    summaries = [parse_into_cache("a", ref, root, 1, False, tight),
                 parse_into_cache("b", ref, root + "2", 0, False, tight),
                 parse_file("c", ref, root + "3", 1, tight).summary,
                 parse_batch_into_cache([("d", ref, False, True)], root + "4", tight)[0][1]]
    assert [(s["state"], s["events"]) for s in summaries] == [("truncated", 10)] * 4
    monkeypatch.setenv(MAX_TOKEN_ENV, "1")  # none passed: the process's settings
    assert parse_into_cache("e", ref, root + "5", 1, False)["state"] == "truncated"
    loose = parse_into_cache("f", ref, root + "6", 1, False, Settings())
    assert (loose["state"], loose["events"]) == ("ok", 21)


def test_the_summary_tasks_use_the_settings_the_command_passes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = open_ref(str(_token_trace(tmp_path / "w.pt.trace.json")))
    monkeypatch.setenv(MAX_TOKEN_ENV, "1000")
    tight = Settings(max_token=MB)
    counts = [summarise_file(ref, None, 1, config=tight),
              summarise_file(ref, tmp_path / "cache", 1, config=tight),
              *summarise_files(InlineExecutor(), [ref, ref], None, config=tight)]
    assert [(c["state"], c["events"]) for c in counts] == [("truncated", 10)] * 4
    assert [c["events"] for c in summarise_files(InlineExecutor(), [ref], None)] == [21]
