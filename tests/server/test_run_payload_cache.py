"""Issue 28 through a real TensorBoard: the Distributed view of a run is kept on disk once built,
so a restarted server answers it from one file, without the ranks' summaries or tables (1,024
cached ranks made a fresh server rebuild the view from every summary on its first request);
a changed rank file is a new set of files, so a stale view is never served."""

from __future__ import annotations

import os
from pathlib import Path

from tb_plugin.discovery import discover_runs
from tb_plugin.server.parse_store import parse_into_cache
from tb_plugin.views.registry import SPECS
from tests.support.dist_ranks import Job, write_job

from .harness import require_entry_point, running_tensorboard
from .test_cache_hostile_http import _payloads, _stored_key


def _distributed(root: Path, logs: Path, cache: Path, name: str) -> dict:
    env = dict(os.environ, TORCH_PROF_CACHE_DIR=str(cache), TORCH_PROF_LOAD_WORKERS="2",
               PYTHONUNBUFFERED="1")
    with running_tensorboard(logs, root / f"{name}.log", env) as tb:
        tb.wait_loaded(timeout=240)
        reply = tb.get("distributed", {"run": "job", "span": "default"})
        assert reply.status == 200, reply.body[:500]
        return reply.json()


def test_a_restarted_server_answers_the_run_from_its_stored_view(tmp_path: Path) -> None:
    require_entry_point()
    logs, cache = tmp_path / "logs", tmp_path / "cache"
    paths = write_job(Job(world=4, tp=2, late={(3, "tp"): 250.0}), logs / "job")
    run = next(r for r in discover_runs(str(logs)) if r.name == "job")
    for spans in run.workers.values():  # as the parsers store them: table and summaries
        parse_into_cache(spans[0].ref.identity(), spans[0].ref, str(cache))
    first = _distributed(tmp_path, logs, cache, "first")
    assert first["stragglers"]["rows"][0]["worker"] == "rank0003"
    rank_summary = SPECS["distributed"].summary_key()
    summaries = [p for p in _payloads(cache) if _stored_key(p) == rank_summary]
    assert len(summaries) == 4
    for path in [*summaries, *cache.rglob("columns.npz")]:
        path.unlink()
    again = _distributed(tmp_path, logs, cache, "again")
    assert again == first
    assert not list(cache.rglob("columns.npz"))  # no rank was parsed or summarised again
    assert not [p for p in _payloads(cache) if _stored_key(p) == rank_summary]
    # a rank file changes: the stored view is not this set of files any more
    os.utime(paths[3], (1, 1))  # a new mtime: a new file version
    changed = _distributed(tmp_path, logs, cache, "changed")
    assert changed == first  # same content, rebuilt from the re-parsed files
    assert len([p for p in _payloads(cache) if _stored_key(p) == rank_summary]) == 4
