"""An unreachable cluster: one clear error naming the address, in bounded time, for the executor,
the CLI and the server's parser pool (whose files then carry that error)."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from pathlib import Path

import pytest

from tb_plugin.cache import TraceCache
from tb_plugin.cli import main
from tb_plugin.executors import ClusterError, RayExecutor
from tb_plugin.server.pool import LoadPool
from tb_plugin.server.store import RunStore
from tb_plugin.settings import Settings, settings
from tests.cluster.ranks import write_run
from tests.cluster.support import Outcomes, closed_port, import_ray


@pytest.fixture
def address() -> str:
    import_ray()
    return f"ray://127.0.0.1:{closed_port()}"


def test_executor_names_the_unreachable_address(address: str, caplog) -> None:
    caplog.set_level(logging.ERROR, logger="tb_plugin.executors")
    executor = RayExecutor(address, timeout_s=5)
    assert isinstance(executor.error, ClusterError)
    assert address in str(executor.error) and "TORCH_PROF_CLUSTER" in str(executor.error)
    future: Future = executor.submit(sorted, [2, 1])
    with pytest.raises(ClusterError, match="cannot reach the Ray cluster at"):
        future.result(timeout=0)  # failed at once, not queued
    assert len([r for r in caplog.records if address in r.getMessage()]) == 1


def test_cli_exits_with_the_error(address: str, tmp_path: Path, capsys) -> None:
    write_run(tmp_path / "logs", 4)
    assert main(["summary", str(tmp_path / "logs"), "--cluster", address]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot reach the Ray cluster at " + address)


def test_bad_address_is_a_usage_error_not_a_hang() -> None:
    import_ray()
    executor = RayExecutor("ray://no-port-here", timeout_s=5)
    assert "expected ray://HOST:PORT" in str(executor.error)


def test_server_files_carry_the_cluster_error(address: str, tmp_path: Path) -> None:
    write_run(tmp_path / "logs", 3)
    outcomes = Outcomes(3)
    config = Settings(cluster=address)

    def pool(root, on_start, on_progress, on_done):
        return LoadPool(root, on_start, on_progress, outcomes.wrap(on_done), config=config)

    store = RunStore(str(tmp_path / "logs"), cache=TraceCache(tmp_path / "cache"),
                     config=config, pool_factory=pool)
    try:
        store.start()
        assert outcomes.wait(60)
        files = [f for run in store.listing()["runs"] for w in run["workers"]
                 for f in w["spans"]]
    finally:
        store.close()
    assert len(files) == 3
    for entry in files:
        assert entry["state"] == "error"
        assert any(address in message for message in entry["messages"]), entry


def test_cluster_setting_is_read_from_the_environment() -> None:
    assert settings({"TORCH_PROF_CLUSTER": " ray://head:10001 "}).cluster == "ray://head:10001"
    assert settings({}).cluster is None
    config = settings({"TORCH_PROF_CACHE_DIR": "s3://bucket/cache"})
    assert (config.cache_url, config.cache_dir) == ("s3://bucket/cache", None)
