"""Synthetic multi-rank runs: one small Kineto-shaped trace per rank (steps, operators, kernels,
runtime launches and NCCL collectives), with rank-dependent durations so no two ranks' numbers
are the same. Used by the cluster tests and by bench/cluster_bench.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

NCCL_ALL_REDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"
GEMM = "volta_sgemm_128x64_nn"
PID = 4242


def rank_events(rank: int, steps: int = 3, ops_per_step: int = 4) -> list[dict[str, Any]]:
    """The events of one rank: `steps` ProfilerSteps, each with `ops_per_step` aten::mm (one
    GEMM kernel each) and one nccl:all_reduce (its NCCL kernel); times in us."""
    events: list[dict[str, Any]] = []
    ts, ext = 1000.0, 1
    slow = 1 + (rank % 7) * 0.1  # stragglers: ranks 6, 13, ... are 60% slower
    for step in range(1, steps + 1):
        start = ts
        for _ in range(ops_per_step):
            dur = round(40 * slow + (rank % 5), 3)
            events.append(_cpu("aten::mm", ts, dur, ext, [[64, 64], [64, 64]]))
            events.append(_runtime(ts + 2, 5, ext))
            events.append(_kernel(GEMM, ts + 10, dur * 1.5, ext, "stream 7"))
            ts += dur + 5
            ext += 1
        comm = round(30 + (rank % 3) * 4, 3)
        events.append(_cpu("nccl:all_reduce", ts, comm, ext, [[4096]], collective="allreduce"))
        events.append(_runtime(ts + 1, 4, ext))
        events.append(_kernel(NCCL_ALL_REDUCE, ts + 6, comm * 2, ext, "stream 16"))
        ts += comm * 2 + 20
        ext += 1
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                       "pid": PID, "tid": PID, "ts": start - 1, "dur": ts - start + 1,
                       "args": {"External id": 100_000 + step}})
    return events


def write_rank(folder: Path, rank: int, world_size: int, **shape: Any) -> Path:
    path = folder / f"host{rank // 8}_rank{rank}.1.pt.trace.json"
    document = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-40GB", "totalGlobalMem":
                              42_314_694_656, "computeMajor": 8, "computeMinor": 0,
                              "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
                              "regsPerBlock": 65536, "regsPerMultiprocessor": 65536,
                              "warpSize": 32, "sharedMemPerBlock": 49152,
                              "sharedMemPerMultiprocessor": 167936, "numSms": 108,
                              "sharedMemPerBlockOptin": 166912}],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world_size},
        "traceEvents": rank_events(rank, **shape),
    }
    path.write_text(json.dumps(document))
    return path


def write_run(logdir: Path, ranks: int, name: str = "job", **shape: Any) -> Path:
    """A logdir with one run of `ranks` rank files; returns the run folder."""
    run = logdir / name
    run.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        write_rank(run, rank, ranks, **shape)
    return run


def _cpu(name: str, ts: float, dur: float, ext: int, dims: Any, **extra: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"External id": ext, "Input Dims": dims, "Input type": ["float"]}
    if "collective" in extra:
        args.update({"Collective name": extra["collective"], "In msg nelems": 4096,
                     "Out msg nelems": 4096, "Group size": 8, "dtype": "Float"})
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": PID, "tid": PID, "ts": ts,
            "dur": dur, "args": args}


def _runtime(ts: float, dur: float, ext: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": PID,
            "tid": PID, "ts": ts, "dur": dur, "args": {"correlation": ext, "External id": ext}}


def _kernel(name: str, ts: float, dur: float, ext: int, stream: str) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts,
            "dur": round(dur, 3), "args": {"device": 0, "stream": int(stream.split()[1]),
                                           "correlation": ext, "external id": ext,
                                           "grid": [4, 1, 1], "block": [128, 1, 1],
                                           "registers per thread": 64,
                                           "shared memory": 0}}
