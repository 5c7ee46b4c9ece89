"""`distributed.run` at its rules: the matching summary (each mode's note, "mixed" and "none"),
and the node source reaching the process-group rows (nodes unknown: no locality, link or peak;
`hostname_pid` worker names: nodes from the names), on the generated FSDP-like two-rank trace
(tests/support/fsdp_trace.py) without `distributedInfo`."""

from __future__ import annotations

from pathlib import Path

from tb_plugin.analysis.distributed.groups import NETWORK_LINK, NETWORK_PEAK_GBPS
from tb_plugin.analysis.distributed.run import build_distributed, matching
from tb_plugin.analysis.distributed.summary import Group, rank_summary
from tests.analysis.helpers import cpu_op, make_table
from tests.support.fsdp_trace import FIRST_GATHER_END, distributed_info, fsdp_events

SEQUENCE = ("Matched by (process group, sequence number): every call carries record_param_comms' "
            "Seq, so ranks whose windows differ still meet.")
ORDER = ("Matched by call order per process group (the trace has no Seq): right only when every "
         "rank recorded the same steps.")
MIXED = ("By sequence number where every call of the group carries Seq, by call order "
         "elsewhere (see groups).")


def test_matching_modes_and_notes() -> None:
    assert matching({}) == {"by": "none", "groups": {}, "note": ""}
    assert matching({"0": "sequence", "1": "sequence"}) == {
        "by": "sequence", "groups": {"0": "sequence", "1": "sequence"}, "note": SEQUENCE}
    assert matching({"0": "order"}) == {"by": "order", "groups": {"0": "order"}, "note": ORDER}
    assert matching({"0": "sequence", "1": "order"}) == {
        "by": "mixed", "groups": {"0": "sequence", "1": "order"}, "note": MIXED}


def _payload(tmp_path: Path, names: tuple[str, str]) -> dict:
    return build_distributed({name: make_table(fsdp_events(end), tmp_path)
                              for name, end in zip(names, FIRST_GATHER_END)})


def test_unknown_nodes_give_no_locality(tmp_path: Path) -> None:
    payload = _payload(tmp_path, ("w0", "w1"))
    assert [(d["worker"], d["node"], d["node_source"]) for d in payload["devices"]] == [
        ("w0", "w0", "worker"), ("w1", "w1", "worker")]
    [row] = payload["groups"]["rows"]
    assert (row["workers"], row["nodes"], row["locality"], row["link"], row["peak_gbps"]) == (
        ["w0", "w1"], None, None, None, None)
    assert payload["matching"] == {"by": "order", "groups": {"default": "order"}, "note": ORDER}


def test_worker_names_give_the_nodes(tmp_path: Path) -> None:
    payload = _payload(tmp_path, ("hostA_11", "hostB_12"))
    assert [(d["node"], d["node_source"], d["pid"]) for d in payload["devices"]] == [
        ("hostA", "worker name", "23803"), ("hostB", "worker name", "23803")]
    [row] = payload["groups"]["rows"]
    assert (row["nodes"], row["locality"], row["link"], row["peak_gbps"]) == (
        2, "inter-node", NETWORK_LINK, NETWORK_PEAK_GBPS)


def test_summary_reads_the_process_groups(tmp_path: Path) -> None:
    config = [{"pg_name": "0", "pg_size": 4, "ranks": [0, 1, 2, 3], "pg_desc": "default_pg"},
              {"pg_name": "1", "ranks": [0, "x", 2.0], "pg_desc": None},  # size: 2 ranks
              {"pg_size": 8, "ranks": [0]},  # no name: skipped
              "not a group"]
    info = {"backend": "nccl", "rank": 0, "world_size": 4, "pg_config": config}
    summary = rank_summary(make_table(fsdp_events(FIRST_GATHER_END[0]), tmp_path,
                                      distributedInfo=info))
    assert summary.groups == [Group(name="0", size=4, ranks=[0, 1, 2, 3], desc="default_pg"),
                              Group(name="1", size=2, ranks=[0, 2], desc="")]
    no_config = rank_summary(make_table(fsdp_events(FIRST_GATHER_END[0]), tmp_path,
                                        distributedInfo={**info, "pg_config": {"0": 4}}))
    assert no_config.groups == []


def test_tables_of_the_two_rank_run_every_key(tmp_path: Path) -> None:
    """Each call moves 1024 floats (4096 bytes a rank). Collectives (kernel spans): all-gather
    #0 200 us on w0, 100 on w1 (w1 last, w0 waits 100); all-gather #1 and #2 100 us on both;
    the reduce-scatter 200 us on both. All-gather S = 2 x 4096 = 8192 bytes."""
    payload = _payload(tmp_path, ("w0", "w1"))
    assert payload["coverage"] == {"world_size": None, "ranks_present": 2, "ranks": [],
                                   "missing": 0, "missing_ranks": [], "complete": True,
                                   "message": ""}
    [row] = payload["groups"]["rows"]
    # busbw over the group: (3 x 8192 + 4096) x (2-1)/2 bytes in 500 us = 0.028672 GB/s
    assert row == {"group": "default", "size": 2, "ranks_present": 2, "workers": ["w0", "w1"],
                   "nodes": None, "locality": None, "link": None, "peak_gbps": None,
                   "collectives": 4, "bytes": 3 * 8192 + 4096, "transfer_us": 500.0,
                   "busbw_gbps": 0.029, "total_wait_us": 100.0, "straggler": "w1",
                   "straggler_share": 1.0}
    assert payload["bandwidth"] == [
        {"collective": "all_gather", "group_size": 2, "calls": 3, "bytes": 3 * 8192,
         "transfer_us": 300.0, "algbw_gbps": round(3 * 8192 / 300 / 1e3, 3),
         "bus_factor": 0.5, "busbw_gbps": round(3 * 8192 / 300 / 1e3 / 2, 3), "peak_gbps": None},
        {"collective": "reduce_scatter", "group_size": 2, "calls": 1, "bytes": 4096,
         "transfer_us": 200.0, "algbw_gbps": round(4096 / 200 / 1e3, 3), "bus_factor": 0.5,
         "busbw_gbps": round(4096 / 200 / 1e3 / 2, 3), "peak_gbps": None}]
    assert payload["stragglers"] == {"total": 2, "skewed_collectives": 1, "total_wait_us": 100.0,
                                     "rows": [
        {"worker": "w1", "collectives": 1, "last": 1, "last_by_collective": {"all_gather": 1},
         "imposed_wait_us": 100.0, "imposed_share": 1.0, "waited_us": 0.0},
        {"worker": "w0", "collectives": 1, "last": 0, "last_by_collective": {},
         "imposed_wait_us": 0.0, "imposed_share": 0.0, "waited_us": 100.0}]}
    # per op: latency = the union of its kernels, transfer = the union of [end - transfer, end)
    gather, scatter = "nccl:_all_gather_base", "nccl:_reduce_scatter_base"
    assert payload["comm_ops"]["w0"]["rows"] == [
        {"name": gather, "calls": 3, "total_bytes": 12288, "avg_bytes": 4096,
         "total_latency_us": 400.0, "avg_latency_us": round(400 / 3, 3),
         "total_transfer_us": 300.0, "avg_transfer_us": 100.0, "unmatched_calls": 0},
        {"name": scatter, "calls": 1, "total_bytes": 4096, "avg_bytes": 4096,
         "total_latency_us": 200.0, "avg_latency_us": 200.0, "total_transfer_us": 200.0,
         "avg_transfer_us": 200.0, "unmatched_calls": 0}]
    assert [(r["name"], r["total_latency_us"], r["total_transfer_us"])
            for r in payload["comm_ops"]["w1"]["rows"]] == [(gather, 300.0, 300.0),
                                                           (scatter, 200.0, 200.0)]


def test_rank_summary_fields(tmp_path: Path) -> None:
    """Rank 0 of the FSDP-like trace (no step markers: one step "0" over everything): its four
    calls with their kernels' spans, 4096 bytes each, the host name from either key."""
    info = {"backend": "nccl", "rank": 0, "world_size": 2}
    summary = rank_summary(make_table(fsdp_events(FIRST_GATHER_END[0]), tmp_path,
                                      distributedInfo=info, host_name="hostA"))
    assert (summary.rank, summary.world_size, summary.backend, summary.hostname, summary.pid,
            summary.fsdp, summary.groups) == (0, 2, "nccl", "hostA", "23803", True, [])
    calls = summary.calls
    assert calls.collective == ["all_gather", "all_gather", "reduce_scatter", "all_gather"]
    assert calls.group == ["default"] * 4 and calls.step == [0, 0, 0, 0]
    assert calls.bytes == [4096.0] * 4
    assert (calls.dev_start, calls.dev_end) == ([15.0, 1300.0, 2050.0, 3000.0],
                                                [215.0, 1400.0, 2250.0, 3100.0])
    assert (calls.host_start, calls.host_end) == ([10.0, 1010.0, 2010.0, 3000.0],
                                                  [20.0, 1020.0, 2020.0, 3010.0])
    assert calls.module == ["Block_0", "Block_1", "layers.1", ""]
    other = rank_summary(make_table(fsdp_events(FIRST_GATHER_END[0]), tmp_path,
                                    distributedInfo={"rank": "x"}, hostname="hostB"))
    assert (other.rank, other.world_size, other.backend, other.hostname) == (
        None, None, None, "hostB")


def test_messages_for_differing_call_counts_and_silent_workers(tmp_path: Path) -> None:
    """w0 has the trace's three all-gathers and one reduce-scatter; w1 lacks the last
    all-gather; w2 has no communication at all."""
    full = fsdp_events(FIRST_GATHER_END[0])
    payload = build_distributed({
        "w0": make_table(full, tmp_path), "w1": make_table(full[:-2], tmp_path),
        "w2": make_table([cpu_op("aten::mm", 0, 10)], tmp_path)})
    assert payload["messages"] == [
        "w2: no communication ops found.",
        "nccl:_all_gather_base: call counts differ between workers (w0: 3, w1: 2); calls were "
        "matched in order per process group, the first 2 on every worker."]


def test_a_collective_missing_on_one_rank_is_unmatched(tmp_path: Path) -> None:
    """Ranks 0 and 1 of a world of 2; rank 1 lacks the last all-gather [3000,3100): on rank 0
    it is unmatched (neither transfer nor wait), and per step only its part inside the step
    counts: the trace has no launch calls, so the fallback step "0" ends with the last host
    op [3000,3010): 10 us. Rank 0's matched time: all-gather #0 [15,215) of which the last
    100 us are transfer (rank 1 took 100), #1 100 us, the reduce-scatter 200 us: transfer 400,
    synchronizing 100."""
    full = fsdp_events(FIRST_GATHER_END[0])
    payload = build_distributed({
        "w0": make_table(full, tmp_path, distributedInfo=distributed_info(0)),
        "w1": make_table(fsdp_events(FIRST_GATHER_END[1])[:-2], tmp_path,
                         distributedInfo=distributed_info(1))})
    assert payload["wait"]["0"]["w0"] == {"transfer": 400.0, "synchronizing": 100.0,
                                          "unmatched": 10.0}
    # rank 1's step ends with its last host op, aten::mm [2030,2040): its reduce-scatter
    # [2050,2250) lies after it; the two all-gathers are 100 us of transfer each
    assert payload["wait"]["0"]["w1"] == {"transfer": 200.0, "synchronizing": 0.0,
                                          "unmatched": 0.0}
    rows = {r["name"]: r for r in payload["comm_ops"]["w0"]["rows"]}
    assert (rows["nccl:_all_gather_base"]["unmatched_calls"],
            rows["nccl:_reduce_scatter_base"]["unmatched_calls"]) == (1, 0)
    [unmatched] = [c for c in payload["collectives"]["rows"] if c["ranks"] == 1]
    assert (unmatched["seq"], unmatched["transfer_us"], unmatched["skew_us"],
            unmatched["last_arriver"], unmatched["complete"]) == (2, None, None, None, False)
