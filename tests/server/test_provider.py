"""What the provider hands the routes (`provider.TraceFile`): plain values of one file version,
taken when the route asked, never the catalogue's live `FileState`. A real `RunStore` over
samples/, whose parser pool (the catalogue's injectable seam) parses nothing until the test
reports an outcome, as `LoadPool` does when a child finishes."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from tb_plugin.server.errors import StillLoading, Unprocessable
from tb_plugin.server.pool import LoadOutcome
from tb_plugin.server.provider import TraceFile
from tests.server.test_units import RecordingPool, _store

SERVER = Path(__file__).resolve().parents[2] / "tb_plugin" / "server"
ROUTE_MODULES = ("handlers.py", "plugin.py", "capture_routes.py", "diff_default.py", "api.py")
RANK0 = ("ddp_gloo", "vm_9852_rank0", "1")


def _ok(features: dict[str, int]) -> dict[str, object]:
    return {"state": "ok", "messages": [], "events": 1, "features": features}


def test_a_route_gets_a_frozen_snapshot_of_the_file_version(tmp_path: Path) -> None:
    pools: list[RecordingPool] = []
    store = _store(tmp_path, pools)
    try:
        before = store.file(*RANK0)  # queued: whatever its state
        assert isinstance(before, TraceFile)
        assert (before.run, before.worker, before.span) == RANK0
        assert before.name == "vm_9852_rank0.1795260318969.pt.trace.json.gz"
        assert before.identity == before.ref.identity()
        assert dict(before.features) == {"memory_timeline": False, "memory_snapshot": False}
        with pytest.raises(dataclasses.FrozenInstanceError):
            before.identity = "another"  # type: ignore[misc]
        with pytest.raises(TypeError):
            before.features["comm_ops"] = 1  # type: ignore[index]
        pools[0].on_done(LoadOutcome(before.identity, summary=_ok({"comm_ops": 2})))
        after = store.usable_file(*RANK0)
        assert after.features["comm_ops"] == 2
        assert "comm_ops" not in before.features  # the earlier snapshot did not change
        assert after == before  # the same version: equal whatever the parser learnt since
        other = store.file("ddp_gloo", "vm_9852_rank0", "2")
        assert other != before and other.identity != before.identity
    finally:
        store.close()


def test_a_span_with_an_export_hands_it_over(tmp_path: Path) -> None:
    store = _store(tmp_path, [])
    try:
        file = store.file("cnn_bs32", "vm_9710", "1")
        assert file.memory_timeline is not None
        assert file.memory_timeline.name == "vm_9710.1795260294695.raw.json.gz"
        assert file.features["memory_timeline"] is True
        assert store.file(*RANK0).memory_timeline is None
    finally:
        store.close()


def test_usable_file_is_202_while_pending_and_422_when_broken(tmp_path: Path) -> None:
    pools: list[RecordingPool] = []
    store = _store(tmp_path, pools)
    try:
        identity = store.file(*RANK0).identity
        with pytest.raises(StillLoading):
            store.usable_file(*RANK0)
        assert pools[0].bumped == [identity]  # and it is parsed first
        rank1 = ("ddp_gloo", "vm_9853_rank1", "1")
        pools[0].on_done(LoadOutcome(store.file(*rank1).identity,
                                     error="the parser process died"))
        with pytest.raises(Unprocessable, match="the parser process died"):
            store.usable_file(*rank1)
    finally:
        store.close()


def test_want_takes_names_and_bumps_only_pending_files(tmp_path: Path) -> None:
    pools: list[RecordingPool] = []
    store = _store(tmp_path, pools)
    try:
        base, exp = ("cnn_bs32", "vm_9710", "1"), ("cnn_bs64", "vm_9710", "2")
        store.want(base, exp)
        assert pools[0].bumped == [store.file(*base).identity, store.file(*exp).identity]
        pools[0].bumped.clear()
        pools[0].on_done(LoadOutcome(store.file(*base).identity, summary=_ok({})))
        store.want(base, exp)  # the parsed side is not bumped again
        assert pools[0].bumped == [store.file(*exp).identity]
    finally:
        store.close()


def test_span_files_are_handed_over_by_worker(tmp_path: Path) -> None:
    pools: list[RecordingPool] = []
    store = _store(tmp_path, pools)
    try:
        for worker in ("vm_9852_rank0", "vm_9853_rank1"):
            pools[0].on_done(LoadOutcome(store.file("ddp_gloo", worker, "1").identity,
                                         summary=_ok({"comm_ops": 2})))
        usable, skipped = store.span_files("ddp_gloo", "1")
        assert skipped == {}
        assert {w: (f.run, f.worker, f.span) for w, f in usable.items()} == {
            w: ("ddp_gloo", w, "1") for w in ("vm_9852_rank0", "vm_9853_rank1")}
        assert all(isinstance(f, TraceFile) for f in usable.values())
    finally:
        store.close()


def test_no_route_module_names_the_catalogues_file_state() -> None:
    """The routes depend on the provider's plain data only: none of their modules imports or
    names `FileState` (the catalogue's mutable record)."""
    for module in ROUTE_MODULES:
        tree = ast.parse((SERVER / module).read_text())
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                  for a in n.names}
        assert "FileState" not in names, module
    # the check sees the name where it is used
    assert "FileState" in {a.name for n in ast.walk(ast.parse((SERVER / "store.py").read_text()))
                           if isinstance(n, ast.ImportFrom) for a in n.names}
