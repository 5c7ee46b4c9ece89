"""Distributed view: the reference vectors (spec 3.12, 5.2 TestDistributed), PyTorch 2.x comm
ops, mismatched workers, bug 12d, and the real NCCL/gloo traces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pytest

from tb_plugin.analysis.breakdown import CATEGORIES, compute_breakdown
from tb_plugin.analysis.distributed.rank import comm_ops, worker_node_pid
from tb_plugin.analysis.distributed.run import build_distributed
from tb_plugin.load import load_trace
from tests.analysis.helpers import make_table
from tests.support import SAMPLES, SHARED_TRACES, needs_shared


def _op(name: str, tid: Any, ts: float, dur: float, ext: int, dims: Any = None,
        types: Any = None, cat: str = "cpu_op", pid: Any = 23803, **args: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {"External id": ext, **args}
    if dims is not None:
        arguments["Input Dims"] = dims
    if types is not None:
        arguments["Input type"] = types
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": arguments}


def _kernel(name: str, ts: float, dur: float, corr: int, ext: int,
            stream: str = "stream 16") -> dict[str, Any]:
    return {"ph": "X", "cat": "Kernel", "name": name, "pid": 0, "tid": stream, "ts": ts,
            "dur": dur, "args": {"device": 0, "correlation": corr, "external id": ext}}


def _runtime(ts: float, dur: float, corr: int, ext: int, tid: Any = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 23803,
            "tid": tid, "ts": ts, "dur": dur, "args": {"correlation": corr, "External id": ext}}


def _costs(table) -> list[float]:
    breakdown = compute_breakdown(table)
    return [float(breakdown.costs[c][0]) for c in CATEGORIES] + [float(breakdown.totals[0])]


def _row_values(row: dict[str, Any]) -> list[Any]:
    """A comm-op row in the reference's column order, averages rounded like the reference."""
    return [row["name"], row["calls"], row["total_bytes"], row["avg_bytes"],
            row["total_latency_us"], round(row["avg_latency_us"]), row["total_transfer_us"],
            round(row["avg_transfer_us"])]


def _four(values: dict[str, float]) -> list[float]:
    return [values["computation"], values["overlap"], values["communication"], values["other"]]


def _two(values: dict[str, float]) -> list[float]:
    return [values["transfer"], values["synchronizing"]]


# --- test_distributed_nccl -----------------------------------------------------------------------

NCCL_BROADCAST = "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)"
NCCL_ALL_REDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel"


def _nccl_worker(broadcast: tuple, broadcast_kernel: tuple, add: float, add_kernel: float,
                 all_reduce_kernel: tuple) -> list[dict[str, Any]]:
    return [
        _op("nccl:broadcast", "23803", *broadcast, 146, [[53120]], ["float"]),
        _kernel(NCCL_BROADCAST, *broadcast_kernel, 28506, 146),
        _op("aten::add_", "23803", add, 20, 24504, [[1000], [1000], []], ["float", "float", "Int"]),
        _kernel(ELEMENTWISE, add_kernel, 161, 99765, 24504, "stream 7"),
        _op("nccl:all_reduce", "25166", 160, 75, 2513, [[2049000]], ["float"]),
        _kernel(NCCL_ALL_REDUCE, *all_reduce_kernel, 33218, 2513),
    ]


@pytest.fixture()
def nccl_tables(tmp_path: Path) -> dict[str, Any]:
    w0 = _nccl_worker((0, 75), (16, 16), 100, 130, (162, 1556))
    w1 = _nccl_worker((0, 20), (8, 31), 25, 30, (562, 1058))
    return {"worker0": make_table(w0, tmp_path), "worker1": make_table(w1, tmp_path)}


def test_distributed_nccl(nccl_tables) -> None:
    assert _costs(nccl_tables["worker0"]) == [105, 0, 0, 75, 0, 0, 20, 35, 235]
    assert _costs(nccl_tables["worker1"])[3] == 74
    payload = build_distributed(nccl_tables)
    assert payload["workers"] == ["worker0", "worker1"] and payload["steps"] == ["0"]
    # Communication is each call's kernels (issue 28: the host enqueue range of a GPU
    # collective is not communication time; the reference counted it, so worker0's broadcast
    # host range [0,75) and the all_reduce's enqueue [160,162) made overlap 75 and comm 75).
    # Step [0, 235). worker0: compute kernel [130,291) -> 105; comm kernels [16,32) + [162,1718)
    # -> 16 + 73 = 89; overlap [162,235) = 73: 105 - 73, 73, 89 - 73, 235 - 32 - 73 - 16.
    assert _four(payload["overlap"]["0"]["worker0"]) == [32, 73, 16, 114]
    # worker1: compute [30,191) -> 161; comm [8,39) + [562,..) -> 31; overlap [30,39) = 9.
    assert _four(payload["overlap"]["0"]["worker1"]) == [152, 9, 22, 52]
    # Per step on one clock (issue 14), the same ranges: transfer starts (shortest range over
    # the workers) broadcast 16 us -> worker0 [16,32), worker1 [23,39); all_reduce 1058 us ->
    # worker0 [660,1718), worker1 [562,1620), outside the step. worker0: 89 in all (= the
    # chart's 16 + 73), transfer 16, synchronizing 73; worker1: 31 (= 22 + 9), 16 and 15.
    assert _two(payload["wait"]["0"]["worker0"]) == [16, 73]
    assert _two(payload["wait"]["0"]["worker1"]) == [16, 15]
    rows = {w: [_row_values(r) for r in t["rows"]] for w, t in payload["comm_ops"].items()}
    # latency: the kernels' union; transfer: the union of [real start, end)
    assert rows["worker0"] == [["nccl:broadcast", 1, 212480, 212480, 16, 16, 16, 16],
                               ["nccl:all_reduce", 1, 8196000, 8196000, 1556, 1556, 1058, 1058]]
    assert rows["worker1"] == [["nccl:broadcast", 1, 212480, 212480, 31, 31, 16, 16],
                               ["nccl:all_reduce", 1, 8196000, 8196000, 1058, 1058, 1058, 1058]]
    assert payload["overlap"]["all"] == payload["overlap"]["0"]
    assert payload["wait"]["all"] == payload["wait"]["0"]
    assert payload["messages"] == []
    json.dumps(payload)


# --- test_distributed_gloo_gpu / _cpu -------------------------------------------------------

def _gloo_worker(broadcasts: list[tuple], all_reduces: list[tuple], add: tuple,
                 third: tuple, gpu: bool) -> list[dict[str, Any]]:
    events = [_op("gloo:broadcast", tid, ts, dur, 100 + i, [[53120]], ["float"])
              for i, (tid, ts, dur) in enumerate(broadcasts)]
    events += [_op("gloo:all_reduce", tid, ts, dur, 200 + i, [[2049000]], ["float"])
               for i, (tid, ts, dur) in enumerate(all_reduces)]
    events.append(_op("aten::add_", "23800", *add, 24504, [[1000], [1000], []],
                      ["float", "float", "Int"]))
    if gpu:
        events.append(_kernel(ELEMENTWISE, *third, 99765, 24504, "stream 7"))
    else:
        events.append(_op("aten::mul", "23800", *third, 24505))
    return events


def _gloo_tables(tmp_path: Path, gpu: bool) -> dict[str, Any]:
    w0 = _gloo_worker([("23803", 16, 38), ("23805", 25, 36), ("23803", 66, 18)],
                      [("23805", 110, 18), ("23803", 120, 36)], (0, 20), (30, 101), gpu)
    w1 = _gloo_worker([("23803", 20, 28), ("23805", 28, 30), ("23803", 77, 6)],
                      [("23805", 88, 38), ("23803", 130, 16)], (0, 30), (70, 70), gpu)
    return {"worker0": make_table(w0, tmp_path), "worker1": make_table(w1, tmp_path)}


GLOO_ROWS = {
    "worker0": [["gloo:broadcast", 3, 637440, 212480, 63, 21, 41, 14],
                ["gloo:all_reduce", 2, 16392000, 8196000, 46, 23, 34, 17]],
    "worker1": [["gloo:broadcast", 3, 637440, 212480, 44, 15, 44, 15],
                ["gloo:all_reduce", 2, 16392000, 8196000, 54, 27, 34, 17]],
}


@pytest.mark.parametrize(("gpu", "costs", "overlap"), [
    (True, ([101, 0, 0, 39, 0, 0, 16, 0, 156], [70, 0, 0, 44, 0, 0, 20, 12, 146]),
     ([31, 70, 39, 16], [16, 54, 44, 32])),
    (False, ([0, 0, 0, 109, 0, 0, 47, 0, 156], [0, 0, 0, 98, 0, 0, 36, 12, 146]),
     ([47, 74, 35, 0], [36, 64, 34, 12])),
], ids=["gloo_gpu", "gloo_cpu"])
def test_distributed_gloo(tmp_path: Path, gpu: bool, costs: tuple, overlap: tuple) -> None:
    tables = _gloo_tables(tmp_path, gpu)
    assert _costs(tables["worker0"]) == costs[0]
    assert _costs(tables["worker1"]) == costs[1]
    assert [len(comm_ops(t).ops) for t in tables.values()] == [5, 5]
    payload = build_distributed(tables)
    assert _four(payload["overlap"]["0"]["worker0"]) == overlap[0]
    assert _four(payload["overlap"]["0"]["worker1"]) == overlap[1]
    assert _two(payload["wait"]["0"]["worker0"]) == [75, 34]
    assert _two(payload["wait"]["0"]["worker1"]) == [78, 20]
    rows = {w: [_row_values(r) for r in t["rows"]] for w, t in payload["comm_ops"].items()}
    assert rows == GLOO_ROWS


def test_user_annotation_nccl_all_reduce_is_communication(tmp_path: Path) -> None:
    """Kineto issue 640: the comm op may be a user annotation."""
    event = _op("nccl:all_reduce", 999, 1686070155939447, 71, 647, cat="user_annotation",
                pid=128)
    table = make_table([event], tmp_path)
    assert compute_breakdown(table).has_communication
    rows = build_distributed({"worker0": table})["comm_ops"]["worker0"]["rows"]
    assert [(r["name"], r["calls"], r["total_latency_us"]) for r in rows] == [
        ("nccl:all_reduce", 1, 71)]


# --- degraded input ------------------------------------------------------------------------------

def test_mismatched_collective_counts(tmp_path: Path, nccl_tables) -> None:
    extra = _nccl_worker((0, 75), (16, 16), 100, 130, (162, 1556))
    extra += [_op("nccl:all_reduce", "25166", 2000, 50, 3000, [[10]], ["float"]),
              _kernel(NCCL_ALL_REDUCE, 2010, 30, 40000, 3000)]
    tables = {"worker0": make_table(extra, tmp_path), "worker1": nccl_tables["worker1"]}
    payload = build_distributed(tables)
    rows = {r["name"]: r for r in payload["comm_ops"]["worker0"]["rows"]}
    assert rows["nccl:all_reduce"]["calls"] == 2
    # the unmatched third call (kernel [2010,2040)) is all transfer; the matched ones keep
    # test_distributed_nccl's numbers
    assert rows["nccl:all_reduce"]["total_latency_us"] == 1556 + 30
    assert rows["nccl:all_reduce"]["total_transfer_us"] == 1058 + 30
    assert payload["comm_ops"]["worker1"]["rows"][1]["total_transfer_us"] == 1058
    assert any("nccl:all_reduce: call counts differ" in m and "worker0: 2" in m
               and "worker1: 1" in m for m in payload["messages"])


def test_worker_without_communication(tmp_path: Path, nccl_tables) -> None:
    quiet = make_table([_op("aten::add_", "1", 0, 100, 1)], tmp_path)
    payload = build_distributed({**nccl_tables, "worker2": quiet})
    assert payload["workers"] == ["worker0", "worker1", "worker2"]
    assert payload["comm_ops"]["worker2"]["rows"] == []
    assert payload["overlap"]["0"]["worker2"]["computation"] == 100
    assert "worker2: no communication ops found." in payload["messages"]
    # the others still match each other
    assert _two(payload["wait"]["0"]["worker0"]) == [16, 73]


def test_input_dims_without_input_type(tmp_path: Path) -> None:
    """Bug 12d: the reference raised TypeError and dropped the whole run."""
    events = [_op("nccl:all_reduce", "1", 0, 50, 1, [[1024]]),
              _op("nccl:broadcast", "1", 100, 50, 2, [[16]], ["float"])]
    payload = build_distributed({"worker0": make_table(events, tmp_path)})
    rows = {r["name"]: r for r in payload["comm_ops"]["worker0"]["rows"]}
    assert rows["nccl:all_reduce"]["total_bytes"] == 0
    assert rows["nccl:broadcast"]["total_bytes"] == 64
    assert any("no input types" in m for m in payload["messages"])


def test_unknown_element_type_counts_zero(tmp_path: Path) -> None:
    events = [_op("gloo:all_reduce", "1", 0, 50, 1, [[8], [4]], ["c10::Float4", "double"])]
    payload = build_distributed({"worker0": make_table(events, tmp_path)})
    assert payload["comm_ops"]["worker0"]["rows"][0]["total_bytes"] == 32
    assert any("c10::Float4" in m for m in payload["messages"])


# --- PyTorch 2.x names and nesting -----------------------------------------------------------

def _pt2_nccl_worker(kernel_dur: float, kernel_ext: int = 51) -> list[dict[str, Any]]:
    return [
        _op("ProfilerStep#3", 1, 0, 2000, 1, cat="user_annotation"),
        _op("c10d::allreduce_", 1, 100, 200, 50, [[], [], [], []],
            ["TensorList", "", "", "Scalar"]),
        _op("record_param_comms", 1, 110, 180, 51, **{
            "Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000,
            "dtype": "Float", "Group size": 2, "Process Group Name": "0"}),
        _op("nccl:all_reduce", 1, 120, 160, 52, cat="user_annotation"),
        _runtime(130, 10, 9, kernel_ext),
        _kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 150,
                kernel_dur, 9, kernel_ext),
        {**_op("nccl:all_reduce", 7, 149, kernel_dur + 2, 52, cat="gpu_user_annotation"),
         "pid": 0},
        _op("record_param_comms", 1, 1200, 10, 60, **{"Collective name": "wait"}),
    ]


def test_pytorch2_nested_events_form_one_call(tmp_path: Path) -> None:
    tables = {"rank0": make_table(_pt2_nccl_worker(1000), tmp_path),
              "rank1": make_table(_pt2_nccl_worker(500), tmp_path)}
    payload = build_distributed(tables)
    assert payload["steps"] == ["3"]
    rows = payload["comm_ops"]["rank0"]["rows"]
    assert [(r["name"], r["calls"], r["total_bytes"]) for r in rows] == [
        ("nccl:all_reduce", 1, 4000)]  # In msg nelems x sizeof(Float)
    assert rows[0]["total_latency_us"] == 1000  # its kernel [150, 1150); the host range is not
    # the kernel's shortest over the ranks is 500 us (rank1's [150, 650))
    assert rows[0]["total_transfer_us"] == 500
    assert _two(payload["wait"]["3"]["rank0"]) == [500, 500]
    assert _two(payload["wait"]["3"]["rank1"]) == [500, 0]


def test_kernel_tied_by_its_launch(tmp_path: Path) -> None:
    """Sampled traces: the kernel's external id matches nothing, its launch lies in the op."""
    table = make_table(_pt2_nccl_worker(1000, kernel_ext=999_999), tmp_path)
    rows = build_distributed({"rank0": table})["comm_ops"]["rank0"]["rows"]
    assert rows[0]["total_latency_us"] == 1000  # the kernel [150, 1150), tied to the call


def test_gloo_frontend_and_worker_thread_count_once(tmp_path: Path) -> None:
    """gloo: `c10d::allreduce_` enqueues on the main thread, `gloo:all_reduce` runs on the
    gloo thread; one call, not two."""
    events = [
        _op("c10d::allreduce_", "main", 100, 30, 1, [[[19082]], [], [], [], [], []],
            ["TensorList", "", "", "", "Scalar", "Scalar"]),
        _op("gloo:all_reduce", "gloo", 110, 500, 2, [[19082]], ["float"], cat="user_annotation"),
        _op("c10d::broadcast_", "main", 700, 20, 3, [[[2]], [], [], [], [], []],
            ["TensorList", "", "Scalar", "Scalar", "Scalar", "Scalar"]),
        _op("gloo:broadcast", "gloo", 705, 50, 4, [[2]], ["long int"], cat="user_annotation"),
    ]
    rows = build_distributed({"w": make_table(events, tmp_path)})["comm_ops"]["w"]["rows"]
    assert [(r["name"], r["calls"], r["total_bytes"], r["total_latency_us"]) for r in rows] == [
        ("gloo:all_reduce", 1, 76328, 500), ("gloo:broadcast", 1, 16, 50)]


def test_collective_names_of_pytorch_1_and_2(tmp_path: Path) -> None:
    """all_to_all, send/recv, coalesced and FSDP collectives, with and without backend events."""
    names = ["c10d::alltoall_base_", "c10d::send", "c10d::recv_", "c10d::_allgather_base_",
             "c10d::_reduce_scatter_base_", "c10d::allgather_into_tensor_coalesced_",
             "c10d::reduce_scatter_tensor_coalesced_", "_c10d_functional::all_gather_into_tensor",
             "c10d::barrier", "c10d::allgather_"]
    events = [_op(name, "1", 100 * i, 50, i + 1) for i, name in enumerate(names)]
    events.append(_op("record_param_comms", "1", 5000, 50, 99, **{
        "Collective name": "all_to_all", "In msg nelems": 8, "dtype": "BFloat16"}))
    events.append(_op("aten::all_gather_into_tensor_out", "1", 6000, 50, 100))  # not comm
    rows = build_distributed({"w": make_table(events, tmp_path)})["comm_ops"]["w"]["rows"]
    assert [r["name"] for r in rows] == [*names, "record_param_comms:all_to_all"]
    assert rows[-1]["total_bytes"] == 16


def test_backend_names(tmp_path: Path) -> None:
    names = ["nccl:all_to_all", "nccl:send", "nccl:recv", "nccl:_all_gather_base",
             "nccl:_reduce_scatter_base", "nccl:all_gather_into_tensor_coalesced",
             "nccl:reduce_scatter_tensor_coalesced", "nccl:coalesced", "gloo:all_to_all"]
    events = [_op(name, "1", 100 * i, 50, i + 1, cat="user_annotation")
              for i, name in enumerate(names)]
    rows = build_distributed({"w": make_table(events, tmp_path)})["comm_ops"]["w"]["rows"]
    assert [r["name"] for r in rows] == names


# --- devices --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("worker", "expected"), [
    ("node1_1234", ("node1", "1234")),
    ("vm_9852_rank0", ("vm", "9852")),
    ("my_host_name_77", ("my_host_name", "77")),
    ("worker0", ("worker0", "5")),
])
def test_worker_node_pid(worker: str, expected: tuple[str, str]) -> None:
    assert worker_node_pid(worker, 5) == expected


def test_device_table(tmp_path: Path, nccl_tables) -> None:
    props = [{"id": 0, "name": "A100", "totalGlobalMem": 42297524224, "computeMajor": 8,
              "computeMinor": 0}]
    w0 = _nccl_worker((0, 75), (16, 16), 100, 130, (162, 1556))
    tables = {"node1_1234": make_table(w0, tmp_path, deviceProperties=props,
                                       distributedInfo={"backend": "nccl", "rank": 0,
                                                        "world_size": 2}),
              "worker1": nccl_tables["worker1"]}
    devices = build_distributed(tables)["devices"]
    # the pid is the trace's (its training process), not the one in the worker name (issue 14)
    assert devices[0] == {"worker": "node1_1234", "node": "node1", "node_source": "worker",
                          "pid": "23803",
                          "backend": "nccl", "rank": 0, "world_size": 2,
                          "gpus": [{"id": 0, "name": "A100", "memory_bytes": 42297524224,
                                    "compute_capability": "8.0"}]}
    assert devices[1]["node"] == "worker1" and devices[1]["pid"] == "23803"
    assert devices[1]["gpus"][0]["name"] is None


# --- real traces ---------------------------------------------------------------------------------

def _load(paths: list[Path], names: Optional[list[str]] = None) -> dict[str, Any]:
    names = names or [p.name.split(".")[0] for p in paths]
    return {n: load_trace(str(p), use_cache=False) for n, p in zip(names, paths)}


DDP = SHARED_TRACES / "ddp_2ranks_sampled"
NCCL = SHARED_TRACES / "nccl_collectives"
CPU_ONLY = SHARED_TRACES / "cpu_only"
DDP_GLOO = SAMPLES / "ddp_gloo"


@needs_shared
def test_ddp_2ranks_sampled() -> None:
    payload = build_distributed(_load(sorted(DDP.glob("*.pt.trace.json.gz"))))
    assert payload["workers"] == ["rank0", "rank1"] and payload["steps"] == ["551", "552"]
    for worker in payload["workers"]:
        rows = {r["name"]: r for r in payload["comm_ops"][worker]["rows"]}
        assert set(rows) == {"nccl:all_to_all", "nccl:all_reduce", "nccl:_all_gather_base"}
        assert rows["nccl:all_reduce"]["calls"] == 4 and rows["nccl:all_to_all"]["calls"] == 4
        for row in rows.values():
            assert row["total_bytes"] > 0
            assert 0 < row["total_transfer_us"] <= row["total_latency_us"]
        wait = payload["wait"]["all"][worker]
        assert wait["transfer"] > 0 and wait["synchronizing"] >= 0
    # every NCCL kernel was tied to an op (by its launch: the sampled external ids match none);
    # the only message is the coverage warning (world size 128 in distributedInfo)
    assert payload["messages"] == [payload["coverage"]["message"]]
    assert payload["messages"][0].startswith("Only 2 of 128 ranks are in this run")
    json.dumps(payload)


@needs_shared
def test_nccl_collectives() -> None:
    payload = build_distributed(_load(sorted(NCCL.glob("*.pt.trace.json.gz"))))
    rows = {r["name"]: r for r in payload["comm_ops"]["rank0"]["rows"]}
    assert rows["nccl:all_reduce"]["calls"] == 15 and rows["nccl:broadcast"]["calls"] == 6
    assert rows["nccl:all_reduce"]["total_bytes"] == 306684384  # In msg nelems x 4
    assert rows["nccl:all_reduce"]["total_latency_us"] > 0
    assert payload["devices"][0]["gpus"][0]["name"].startswith("NVIDIA A100")
    assert payload["steps"] == ["4", "5", "6"]


@needs_shared
def test_cpu_only_gloo() -> None:
    payload = build_distributed(_load(sorted(CPU_ONLY.glob("*.pt.trace.json.gz")), ["rank34"]))
    rows = payload["comm_ops"]["rank34"]["rows"]
    assert [(r["name"], r["calls"]) for r in rows] == [("gloo:all_reduce", 10)]
    assert payload["overlap"]["all"]["rank34"]["communication"] > 0


def test_ddp_gloo_sample() -> None:
    files = sorted(DDP_GLOO.glob("*.pt.trace.json.gz"))
    spans: dict[str, list[Path]] = {}
    for path in files:  # span = order of the timestamp per worker
        spans.setdefault(path.name.split(".")[0], []).append(path)
    for index in range(2):
        paths = [sorted(p)[index] for p in spans.values()]
        payload = build_distributed(_load(paths))
        assert len(payload["workers"]) == 2 and len(payload["steps"]) == 2
        for worker in payload["workers"]:
            rows = {r["name"]: r for r in payload["comm_ops"][worker]["rows"]}
            assert rows["gloo:all_reduce"]["calls"] == 4  # 2 DDP buckets x 2 steps
            assert rows["gloo:broadcast"]["calls"] == 4
            assert rows["gloo:all_reduce"]["total_bytes"] > 0
            assert payload["overlap"]["all"][worker]["computation"] > 0
        assert [d["node"] for d in payload["devices"]] == ["vm", "vm"]
        assert payload["messages"] == []
