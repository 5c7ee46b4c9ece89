"""A generated FSDP-like trace (no real FSDP trace is in ../shared/traces): two ranks whose
all-gathers and reduce-scatters run inside nn.Module events and an FSDP2 record function, beside
GEMMs, with overlaps simple enough to derive by hand (tests/analysis/test_dist_fsdp.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PID, TID = 23803, 1
AG = "ncclKernel_AllGather_RING_LL_Sum_float(ncclWorkElem)"
RS = "ncclKernel_ReduceScatter_RING_LL_Sum_float(ncclWorkElem)"
GEMM = "void gemm_kernel<float>()"
#: The end of rank r's first all-gather kernel (it starts at 15): 200 and 100 us long.
FIRST_GATHER_END = (215.0, 115.0)


def _host(cat: str, name: str, ts: float, dur: float, ext: int = 0) -> dict[str, Any]:
    args: dict[str, Any] = {"External id": ext} if ext else {}
    if name.startswith("nccl:"):
        args.update({"Input Dims": [[1024]], "Input type": ["float"]})
    return {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": TID, "ts": ts, "dur": dur,
            "args": args}


def _kernel(name: str, start: float, end: float, ext: int, stream: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "Kernel", "name": name, "pid": 0, "tid": f"stream {stream}",
            "ts": start, "dur": end - start,
            "args": {"device": 0, "stream": stream, "correlation": ext, "external id": ext}}


def fsdp_events(first_gather_end: float) -> list[dict[str, Any]]:
    """Layer Block_0 (nn.Module event) all-gathers on [15, first_gather_end) while a GEMM runs
    on [100, 400); Block_1 all-gathers on [1300, 1400) beside a GEMM on [1000, 1350); the FSDP2
    record function of layers.1's backward reduce-scatters on [2050, 2250) beside a GEMM on
    [2200, 2500); one all-gather on [3000, 3100) is outside every module."""
    return [
        _host("python_function", "nn.Module: Block_0", 0, 1000),
        _host("cpu_op", "nccl:_all_gather_base", 10, 10, 1),
        _kernel(AG, 15, first_gather_end, 1, 20),
        _host("cpu_op", "aten::mm", 30, 10, 11),
        _kernel(GEMM, 100, 400, 11, 7),
        _host("python_function", "nn.Module: Block_1", 1000, 1000),
        _host("cpu_op", "aten::mm", 1002, 4, 12),
        _kernel(GEMM, 1000, 1350, 12, 7),
        _host("cpu_op", "nccl:_all_gather_base", 1010, 10, 2),
        _kernel(AG, 1300, 1400, 2, 20),
        _host("user_annotation", "FSDP::post_backward_reduce (layers.1)", 2000, 100),
        _host("cpu_op", "nccl:_reduce_scatter_base", 2010, 10, 4),
        _kernel(RS, 2050, 2250, 4, 20),
        _host("cpu_op", "aten::mm", 2030, 10, 13),
        _kernel(GEMM, 2200, 2500, 13, 7),
        _host("cpu_op", "nccl:_all_gather_base", 3000, 10, 6),
        _kernel(AG, 3000, 3100, 6, 20),
    ]


def distributed_info(rank: int) -> dict[str, Any]:
    return {"backend": "nccl", "rank": rank, "world_size": 2}


def write_fsdp_run(run: Path) -> Path:
    """`run`/rank{0,1}.pt.trace.json, the two ranks above."""
    run.mkdir(parents=True, exist_ok=True)
    for rank, end in enumerate(FIRST_GATHER_END):
        document = {"schemaVersion": 1, "distributedInfo": distributed_info(rank),
                    "traceEvents": fsdp_events(end)}
        (run / f"rank{rank}.pt.trace.json").write_text(json.dumps(document))
    return run
