"""Issue 28: with an unreachable cluster every rank's file carries the cluster error, and the
run-level Distributed view says so (422 naming the address), not 404 "no communication ops"."""

from __future__ import annotations

from pathlib import Path

import pytest
from tensorboard.plugins import base_plugin
from werkzeug.test import Client
from werkzeug.wrappers import Response

from tb_plugin.cache import TraceCache
from tb_plugin.server.plugin import TorchProfPlugin
from tb_plugin.server.pool import LoadPool
from tb_plugin.server.store import RunStore
from tb_plugin.settings import Settings
from tests.cluster.ranks import write_run
from tests.cluster.support import Outcomes, closed_port, import_ray


@pytest.fixture
def address() -> str:
    import_ray()
    return f"ray://127.0.0.1:{closed_port()}"


def test_distributed_view_names_the_cluster_error(address: str, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    write_run(logs, 3)
    outcomes = Outcomes(3)
    config = Settings(cluster=address)

    def pool(root, on_start, on_progress, on_done):
        return LoadPool(root, on_start, on_progress, outcomes.wrap(on_done), config=config)

    store = RunStore(str(logs), cache=TraceCache(tmp_path / "cache"), config=config,
                     pool_factory=pool)
    apps = TorchProfPlugin(base_plugin.TBContext(logdir=str(logs), multiplexer=None),
                           provider=store).get_plugin_apps()
    client = Client(lambda env, start: apps[env["PATH_INFO"]](env, start), Response)
    try:
        store.start()
        assert outcomes.wait(60)
        run = store.listing()["runs"][0]["name"]
        reply = client.get(f"/distributed?run={run}&span=1")
    finally:
        store.close()
    assert reply.status_code == 422, reply.data[:300]
    error = reply.get_json()["error"]
    assert error["message"] == "no worker of span '1' could be read"
    assert [m.split(":")[0] for m in error["messages"]] == [f"host0_rank{r}" for r in range(3)]
    assert all(f"cannot reach the Ray cluster at {address}" in m for m in error["messages"])
