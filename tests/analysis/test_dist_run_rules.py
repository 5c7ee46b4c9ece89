"""`distributed.run` at its rules: the matching summary (each mode's note, "mixed" and "none"),
and the node source reaching the process-group rows (nodes unknown: no locality, link or peak;
`hostname_pid` worker names: nodes from the names), on the generated FSDP-like two-rank trace
(tests/support/fsdp_trace.py) without `distributedInfo`."""

from __future__ import annotations

from pathlib import Path

from tb_plugin.analysis.distributed.groups import NETWORK_LINK, NETWORK_PEAK_GBPS
from tb_plugin.analysis.distributed.run import build_distributed, matching
from tb_plugin.analysis.distributed.summary import Group, rank_summary
from tests.analysis.helpers import make_table
from tests.support.fsdp_trace import FIRST_GATHER_END, fsdp_events

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
