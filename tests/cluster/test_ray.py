"""A real local Ray instance (2 CPUs): a 64-rank synthetic run gives the same summaries and view
payloads through Ray as through the local process pool; the CLI's progress counts ranks on the
cluster; a worker killed mid-task (mid-read, or mid-write of its cache entry) is retried and
leaves no corrupt cache entry."""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pytest
from tensorboard.plugins import base_plugin
from werkzeug.test import Client
from werkzeug.wrappers import Response

from tb_plugin.cache import TraceCache
from tb_plugin.cli import main
from tb_plugin.executors import RayExecutor
from tb_plugin.load import load_trace
from tb_plugin.server.parse_store import parse_into_cache
from tb_plugin.server.plugin import TorchProfPlugin
from tb_plugin.server.pool import LoadPool
from tb_plugin.server.store import RunStore
from tb_plugin.settings import Settings
from tb_plugin.storage import file_ref, filesystem
from tests.cluster.diefs import MARKER_ENV, DieOnceFS
from tests.cluster.ranks import write_run
from tests.cluster.support import Outcomes, import_ray
from tests.support import REPO

RANKS = 64
#: Hand-derived from ranks.rank_events: 3 steps x (4 x (mm + launch + GEMM) + all_reduce +
#: launch + NCCL kernel + ProfilerStep) = 48 events, 15 kernels, 15 cpu ops (12 mm, 3 nccl).
EVENTS, KERNELS, CPU_OPS = 48, 15, 15


@pytest.fixture(scope="module")
def ray_session() -> Iterator[Path]:
    ray = import_ray()
    markers = Path(tempfile.mkdtemp(prefix="tp-markers-"))
    os.environ[MARKER_ENV] = str(markers)  # before ray.init: the workers inherit it
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             _temp_dir=tempfile.mkdtemp(prefix="tp-ray-"))
    try:
        yield markers
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("logs")
    write_run(root, RANKS)
    return root


DISTRIBUTED = "/distributed?run=job&span=1"
ROUTES = (DISTRIBUTED, "/overview?run=job&worker=host0_rank6&span=1",
          "/operators?run=job&worker=host7_rank63&span=1&group_by=operator")


def _serve(logdir: Path, cache: TraceCache, config: Settings, routes: tuple = ROUTES,
           prepare: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Load the run in a real RunStore (its LoadPool on `config`), then fetch its payloads."""
    outcomes = Outcomes(RANKS)

    def pool(root, on_start, on_progress, on_done):
        return LoadPool(root, on_start, on_progress, outcomes.wrap(on_done), config=config)

    store = RunStore(str(logdir), cache=cache, config=config, pool_factory=pool)
    context = base_plugin.TBContext(logdir=str(logdir), flags=argparse.Namespace(
        logdir=str(logdir), logdir_spec=""))
    apps = TorchProfPlugin(context, provider=store).get_plugin_apps()
    client = Client(lambda env, start: apps[env["PATH_INFO"]](env, start), Response)
    try:
        store.start()
        assert outcomes.wait(300)
        summaries = {o.key.split("|")[0].rsplit("/", 1)[1]: o.summary for o in outcomes.outcomes}
        prepare()
        replies = {route: client.get(route) for route in routes}
    finally:
        store.close()
    assert {r.status_code for r in replies.values()} == {200}, replies
    return {"summaries": summaries, **{k: r.json for k, r in replies.items()}}


def test_ray_gives_the_local_pool_summaries_and_payloads(ray_session: Path, logdir: Path,
                                                         tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    on_ray = _serve(logdir, TraceCache(f"file://{shared}"), Settings(cluster="auto"))
    local = _serve(logdir, TraceCache(tmp_path / "local"), Settings(load_workers=2))
    assert len(on_ray["summaries"]) == RANKS
    assert on_ray == local
    for summary in on_ray["summaries"].values():
        assert (summary["state"], summary["events"]) == ("ok", EVENTS)
        assert (summary["features"]["kernels"], summary["features"]["cpu_ops"]) == (
            KERNELS, CPU_OPS)
    assert len(on_ray["/distributed?run=job&span=1"]["skipped"]) == 0
    # The Ray workers wrote the shared cache (one committed entry per rank); the server read it.
    assert len(list(shared.rglob("COMMIT.json"))) == RANKS


def test_cli_summary_on_the_cluster_counts_ranks(ray_session: Path, logdir: Path,
                                                 tmp_path: Path, capsys) -> None:
    shared = f"file://{tmp_path / 'shared'}"
    assert main(["--cache-dir", shared, "summary", str(logdir), "--json", "--cluster", "auto",
                 "--progress"]) == 0
    out, err = capsys.readouterr()
    assert main(["--cache-dir", str(tmp_path / "local"), "summary", str(logdir), "--json"]) == 0
    assert json.loads(out)["runs"] == json.loads(capsys.readouterr().out)["runs"]
    spans = [s for w in json.loads(out)["runs"][0]["workers"] for s in w["spans"]]
    assert [s["events"] for s in spans] == [EVENTS] * RANKS
    last = err.strip().split("\r")[-1]
    assert f"{RANKS}/{RANKS} files" in last and "[" + "#" * 24 + "]" in last


@pytest.mark.parametrize("die_on", ["read", "write"])
def test_killed_worker_is_retried_without_a_corrupt_entry(ray_session: Path, logdir: Path,
                                                          tmp_path: Path, die_on: str) -> None:
    path = str(logdir / "job" / "host1_rank9.1.pt.trace.json")
    ref = file_ref(DieOnceFS(die_on=die_on), path)
    cache_url = f"dieonce://{tmp_path / 'shared'}" if die_on == "write" else \
        f"file://{tmp_path / 'shared'}"
    executor = RayExecutor("auto")
    try:
        summary = executor.submit(parse_into_cache, "key", ref, cache_url, 1).result(timeout=300)
    finally:
        executor.shutdown()
    killed = ray_session / f"killed-{die_on}"
    assert killed.exists() and int(killed.read_text()) != os.getpid()  # a worker died once
    plain = file_ref(filesystem(path)[0], path)
    assert summary == parse_into_cache("key", plain, str(tmp_path / "local"), 1)
    cached = TraceCache(cache_url).load_table(ref)
    fresh = load_trace(plain, use_cache=False)
    assert cached is not None
    for name, frame in fresh.tables().items():
        pd.testing.assert_frame_equal(getattr(cached, name), frame)
    assert len(list((tmp_path / "shared").rglob("COMMIT.json"))) == 1
    if die_on == "write":  # the dead writer's half file is an orphan generation nobody reads
        files = sorted((tmp_path / "shared").rglob("columns.npz"), key=lambda p: p.stat().st_size)
        assert len(files) == 2 and files[0].stat().st_size < files[1].stat().st_size


def test_distributed_view_of_a_ray_run_reads_summaries_only(ray_session: Path, logdir: Path,
                                                             tmp_path: Path, caplog) -> None:
    """The Ray workers store each rank's Distributed summary beside its table; the run-level
    view is built from those alone: with every table deleted from the shared cache after the
    parse, it still answers, with the payload of a local run that has all its tables."""
    shared = tmp_path / "shared"

    def drop_tables() -> None:
        tables = list(shared.rglob("columns.npz"))
        assert len(tables) == RANKS
        for path in tables:
            path.unlink()

    with caplog.at_level(logging.WARNING):
        on_ray = _serve(logdir, TraceCache(f"file://{shared}"), Settings(cluster="auto"),
                        (DISTRIBUTED,), drop_tables)
    assert not [r for r in caplog.records if "parsing it in the server process" in r.getMessage()
                or "unreadable shared cache entry" in r.getMessage()]
    local = _serve(logdir, TraceCache(tmp_path / "local"), Settings(load_workers=2),
                   (DISTRIBUTED,))
    assert on_ray[DISTRIBUTED] == local[DISTRIBUTED]
    assert len(on_ray[DISTRIBUTED]["skipped"]) == 0
