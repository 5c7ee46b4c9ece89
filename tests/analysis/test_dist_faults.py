"""Issue 28: generated ranks with injected faults (tests/support/dist_ranks.py) against their
ground truth: windows shifted by a step (Seq present and absent), clock offsets with 2-rank
groups, a straggler in one TP group of a TP x DP job, a missing straggler file, nodes from the
trace and the intra-/inter-node split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tb_plugin.analysis.distributed.groups import link_peak
from tb_plugin.analysis.distributed.run import build_distributed
from tb_plugin.load import load_trace
from tests.support import SHARED_TRACES, needs_shared
from tests.support.dist_ranks import (
    TRANSFER_US,
    Job,
    groups,
    rank_document,
    step_us,
    truth,
    write_job,
)


def _payload(job: Job, folder: Path, skip: frozenset[int] = frozenset()) -> dict[str, Any]:
    return build_distributed({p.name.split(".")[0]: load_trace(str(p), use_cache=False)
                              for p in write_job(job, folder, skip)})


def _worker(rank: int) -> str:
    return f"rank{rank:04d}"


def _brute_stragglers(job: Job, present: set[int]) -> dict[str, dict[str, Any]]:
    """Per group from the true arrivals of the present ranks: the waiting at every collective
    (each member's wait for the latest present arrival) and the wait each last arriver
    imposed (the lowest rank among equally late ones)."""
    out: dict[str, dict[str, Any]] = {}
    for c in truth(job):
        arrive = {r: t for r, t in c["arrive"].items() if r in present}
        if len(arrive) < 2:
            continue
        latest = max(arrive.values())
        waits = sum(latest - t for t in arrive.values())
        if waits <= 0:
            continue
        last = min(r for r, t in arrive.items() if t == latest)
        group = out.setdefault(c["group"], {"total": 0.0, "imposed": {}})
        group["total"] += waits
        group["imposed"][last] = group["imposed"].get(last, 0.0) + waits
    return out


def test_window_shifted_by_one_step_matched_by_seq(tmp_path: Path) -> None:
    """Rank 3 records steps 1..3, the others 0..2, every call with its Seq: each collective row
    is one true collective (its step, the members that recorded it, the skew of their true
    arrivals), and rank 3's clock needs no offset."""
    job = Job(shifted=frozenset({3}))
    payload = _payload(job, tmp_path)
    assert payload["matching"]["by"] == "sequence"
    assert payload["clocks"]["offsets_us"][_worker(3)] == 0.0
    recorded = {r: set(range(1, 4)) if r == 3 else set(range(3)) for r in range(job.world)}
    expected = {}
    for c in truth(job):
        members = [r for r in c["arrive"] if c["step"] in recorded[r]]
        arrive = [c["arrive"][r] for r in members]
        if members:
            expected[(c["group"], c["seq"])] = (str(c["step"]), len(members),
                                                max(arrive) - min(arrive) if len(members) > 1
                                                else None)
    rows = payload["collectives"]["rows"]
    assert payload["collectives"]["total"] == len(expected) == len(rows) == 27
    got = {(r["group"], r["seq"]): (r["step"], r["ranks"], r["skew_us"]) for r in rows}
    assert got == expected  # jitter and skews are whole us here


def test_window_shifted_by_one_step_without_seq(tmp_path: Path) -> None:
    """The same job without Seq: matched by call order (the payload says so), rank 3's first
    call is linked to the others' first, one step off, which shows as a whole step of clock
    offset (the issue's +20,012 us)."""
    job = Job(shifted=frozenset({3}), seq=False)
    payload = _payload(job, tmp_path)
    assert payload["matching"]["by"] == "order"
    assert set(payload["matching"]["groups"].values()) == {"order"}
    assert payload["clocks"]["offsets_us"][_worker(3)] == pytest.approx(step_us(job))


@pytest.mark.parametrize("off_rank", [0, 1])
def test_two_rank_group_offset_is_not_smeared(tmp_path: Path, off_rank: int) -> None:
    """World 2, one group of 2: +5,000 us on one rank. The run's clock is rank 0's, so the
    whole difference is the other rank's (never +2,500 / -2,500)."""
    job = Job(world=2, tp=2, offsets={off_rank: 5000.0})
    offsets = _payload(job, tmp_path)["clocks"]["offsets_us"]
    assert offsets == {_worker(0): 0.0, _worker(1): 5000.0 if off_rank == 1 else -5000.0}


def test_offsets_over_tp_and_two_rank_dp_groups(tmp_path: Path) -> None:
    """TP groups of 4, DP groups of 2: +5,000 us on rank 5 and -700 us on rank 2 come out
    exactly, and every innocent rank (rank 1, rank 5's DP partner, too) gets 0."""
    job = Job(offsets={5: 5000.0, 2: -700.0}, late={(6, "dp"): 250.0})
    offsets = _payload(job, tmp_path)["clocks"]["offsets_us"]
    assert offsets == {_worker(r): {5: 5000.0, 2: -700.0}.get(r, 0.0) for r in range(8)}


def test_straggler_in_one_tp_group(tmp_path: Path) -> None:
    """16 ranks, TP groups of 4, DP groups of 4 over 2 nodes: rank 5 is 400 us late at its TP
    all-reduces only. Every group's waiting, top last arriver and share against brute force
    over the true arrivals; rank 5 is its TP group's straggler and the run's."""
    job = Job(world=16, late={(5, "tp"): 400.0})
    payload = _payload(job, tmp_path)
    brute = _brute_stragglers(job, set(range(16)))
    rows = {r["group"]: r for r in payload["groups"]["rows"]}
    assert set(rows) == {g for g, m in groups(job).items() if g != "0"}
    for group, row in rows.items():
        want = brute.get(group, {"total": 0.0, "imposed": {}})
        assert row["total_wait_us"] == pytest.approx(want["total"])
        if want["imposed"]:
            top = min(want["imposed"], key=lambda r: (-want["imposed"][r], r))
            share = want["imposed"][top] / want["total"]
            assert row["straggler_share"] == pytest.approx(share, abs=1e-3)
            assert row["straggler"] == (_worker(top) if share >= 0.5 else None)
    assert rows["2"]["straggler"] == _worker(5) and rows["2"]["straggler_share"] == 1.0
    assert payload["stragglers"]["rows"][0]["worker"] == _worker(5)
    assert payload["recommendations"][0].startswith(f"Straggler: {_worker(5)} (rank 5, host node0")


def test_dp_straggler_named_beside_the_tp_one(tmp_path: Path) -> None:
    """Rank 5 late at TP (3 x 400 us x 3 waiting ranks), rank 10 late at DP (3 x 900 us x 3):
    rank 10 is the run's straggler, and rank 5 is named for its own TP group (group "2")."""
    job = Job(world=16, late={(5, "tp"): 400.0, (10, "dp"): 900.0})
    payload = _payload(job, tmp_path)
    rows = {r["group"]: r for r in payload["groups"]["rows"]}
    assert rows["2"]["straggler"] == _worker(5)
    assert rows["7"]["straggler"] == _worker(10)  # DP group of TP index 2: 2, 6, 10, 14
    recs = payload["recommendations"]
    assert recs[0].startswith(f"Straggler: {_worker(10)} ")
    assert recs[1].startswith(f"Process group 2 (4 ranks): its straggler is {_worker(5)} ")
    assert len(recs) == 2  # groups with under 10% of all waiting are not named


def test_missing_straggler_file(tmp_path: Path) -> None:
    """Rank 5 (late 400 us at its TP all-reduces) wrote no file. The ranks present are ranked
    by the wait they imposed on each other (brute force over their true arrivals); the advice
    names the latest present rank and says rank 5 is missing and may be the cause; the TP
    group's transfer time includes the wait for rank 5 (min over present of end - arrival)."""
    job = Job(world=8, late={(5, "tp"): 400.0})
    payload = _payload(job, tmp_path, skip=frozenset({5}))
    present = set(range(8)) - {5}
    brute = _brute_stragglers(job, present)
    imposed: dict[int, float] = {}
    for group in brute.values():
        for rank, wait in group["imposed"].items():
            imposed[rank] = imposed.get(rank, 0.0) + wait
    top = min(imposed, key=lambda r: (-imposed[r], r))
    assert payload["stragglers"]["rows"][0]["worker"] == _worker(top)
    assert payload["stragglers"]["rows"][0]["imposed_wait_us"] == pytest.approx(imposed[top])
    first = payload["recommendations"][0]
    assert f"{_worker(top)} (rank {top}," in first
    assert "1 rank(s) are missing from the run (5) and may have arrived later still" in first
    transfer = sum(c["end"] - max(t for r, t in c["arrive"].items() if r in present)
                   for c in truth(job) if c["group"] == "2")
    row = next(r for r in payload["groups"]["rows"] if r["group"] == "2")
    assert row["ranks_present"] == 3 and row["transfer_us"] == pytest.approx(transfer)
    assert transfer > 3 * 3 * 2 * TRANSFER_US["tp"]  # each of 6 calls: 400 us late + 100 us


@pytest.mark.parametrize("hostnames", [True, False])
def test_nodes_and_locality(tmp_path: Path, hostnames: bool) -> None:
    """16 ranks on 2 hosts of 8 GPUs: nodes from the trace's hostname, else from the placement
    (rank r on GPU r % 8 of 8 visible); TP groups are intra-node on NVLink 4 (H100, 450 GB/s),
    DP groups (ranks j, j+4, j+8, j+12) inter-node."""
    job = Job(world=16, hostnames=hostnames)
    payload = _payload(job, tmp_path)
    assert [d["node"] for d in payload["devices"]] == [f"node{r // 8}" for r in range(16)]
    assert {d["node_source"] for d in payload["devices"]} == {
        "hostname" if hostnames else "placement"}
    for row in payload["groups"]["rows"]:
        tp = int(row["group"]) <= 4
        assert (row["locality"], row["nodes"]) == (("intra-node", 1) if tp else ("inter-node", 2))
        assert row["peak_gbps"] == (450.0 if tp else 50.0)


def test_link_peaks() -> None:
    assert link_peak({"NVIDIA B200"}) == 900.0  # NVLink 5: 1.8 TB/s both directions
    assert link_peak({"NVIDIA GB200"}) == 900.0
    assert link_peak({"AMD Instinct MI300X"}) == 448.0  # 7 xGMI links x 64 GB/s
    assert link_peak({"NVIDIA H100 80GB HBM3"}) == 450.0
    assert link_peak({"AMD Radeon Graphics"}) is None
    assert link_peak({"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"}) is None


@needs_shared
def test_dlrm_eight_ranks_one_node() -> None:
    """param's DLRM: 8 ranks, each on GPU `rank` of the 8 its process saw, no hostname: one
    node (by placement), so every group is intra-node."""
    folder = SHARED_TRACES / "param_dlrm_8ranks_nccl"
    payload = build_distributed({p.name.split(".")[0]: load_trace(str(p), use_cache=False)
                                 for p in sorted(folder.glob("*.pt.trace.json"))})
    assert {d["node"] for d in payload["devices"]} == {"node0"}
    assert {d["node_source"] for d in payload["devices"]} == {"placement"}
    assert {r["locality"] for r in payload["groups"]["rows"]} == {"intra-node"}
    assert payload["matching"]["by"] == "order"  # these traces carry no Seq


def test_seq_only_where_every_call_of_the_group_has_it(tmp_path: Path) -> None:
    """The rule's boundary: rank 6 wrote no Seq (an older PyTorch on that host). Its TP group
    ("2": ranks 4-7) and its DP group ("5": ranks 2, 6) fall back to call order, every other
    group keeps sequence numbers: "mixed"."""
    job = Job()
    write_job(job, tmp_path)
    old = Job(seq=False)
    path = tmp_path / "rank0006.pt.trace.json"
    path.write_text(json.dumps(rank_document(old, 6)))
    payload = build_distributed({p.name.split(".")[0]: load_trace(str(p), use_cache=False)
                                 for p in sorted(tmp_path.glob("*.pt.trace.json"))})
    assert payload["matching"]["by"] == "mixed"
    assert payload["matching"]["groups"] == {
        g: "order" if g in ("2", "5") else "sequence" for g in groups(job) if g != "0"}
