"""Generated multi-rank jobs with injected faults and their ground truth (issue 28).

A job is `world` ranks in tensor-parallel groups of `tp` consecutive ranks (TP all-reduces),
data-parallel groups of the ranks with the same TP index (DP all-reduces, 2 ranks each at
world 8, tp 4) and, optionally, expert-parallel all-to-alls over the whole world (a MoE job).
Every step runs the same schedule of collectives, each in its own time slot on a *true* clock:
rank r arrives at collective c of step k at `slot + jitter(r, c) + late(r, c)`, the collective
ends for all its members at the latest member's arrival plus the transfer time, so each rank's
NCCL kernel runs from its arrival to that common end. A rank's trace clock is the true clock
plus `offsets[r]`; a rank in `shifted` records steps 1..steps instead of 0..steps-1 (its
profiler window starts one step later). Events are what PyTorch 2.x writes: `record_param_comms`
(with `Process Group Name`, `Group size`, `Collective name`, message sizes, and `Seq`, the
per-process-group sequence number counted from the start of the job, when `seq` is on) around a
`nccl:<op>` event, its `cudaLaunchKernel` and the NCCL kernel; a GEMM before each collective;
`ProfilerStep#k` annotations; `distributedInfo` with `pg_config`; `deviceProperties`; the
hostname (`node<r // gpus_per_node>`) as a top-level `hostname` key when `hostnames` is on.

`truth(job)` returns, per collective instance, its members' true arrivals, so tests derive the
expected waits, last arrivers and stragglers independently of the analysis.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SLOT_US = 3000.0
HOST_LEAD_US = 40.0  # the host enqueues a collective this long before its GPU arrival
KERNELS = {"all_reduce": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage)",
           "all_to_all": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage)"}
COLLECTIVE_ARG = {"all_reduce": "allreduce", "all_to_all": "all_to_all"}
TRANSFER_US = {"tp": 100.0, "dp": 300.0, "ep": 200.0}
NELEMS = {"tp": 1 << 20, "dp": 1 << 22, "ep": 1 << 21}


@dataclass
class Job:
    world: int = 8
    tp: int = 4
    steps: int = 3
    tp_calls: int = 2  # TP all-reduces per step
    dp_calls: int = 1  # DP all-reduces per step
    ep_calls: int = 0  # world all-to-alls per step (MoE expert parallelism)
    seq: bool = True
    offsets: dict[int, float] = field(default_factory=dict)  # rank -> clock offset, us
    late: dict[tuple[int, str], float] = field(default_factory=dict)  # (rank, "tp"|...) -> us
    shifted: frozenset[int] = frozenset()
    gpus_per_node: int = 8
    hostnames: bool = True
    gpu_name: str = "NVIDIA H100 80GB HBM3"
    jitter_us: float = 4.0  # rank- and collective-dependent arrival noise (0 .. jitter_us)


def schedule(job: Job) -> list[tuple[str, str]]:
    """One step's collectives in order: (group kind, collective)."""
    return ([("tp", "all_reduce")] * job.tp_calls + [("ep", "all_to_all")] * job.ep_calls
            + [("dp", "all_reduce")] * job.dp_calls)


def groups(job: Job) -> dict[str, list[int]]:
    """Process-group name -> member ranks: "0" the world, then TP groups, then DP groups."""
    out = {"0": list(range(job.world))}
    n_tp = job.world // job.tp
    for i in range(n_tp):
        out[str(1 + i)] = list(range(i * job.tp, (i + 1) * job.tp))
    for j in range(job.tp):
        out[str(1 + n_tp + j)] = list(range(j, job.world, job.tp))
    return out


def group_of(job: Job, rank: int, kind: str) -> str:
    n_tp = job.world // job.tp
    return {"ep": "0", "tp": str(1 + rank // job.tp), "dp": str(1 + n_tp + rank % job.tp)}[kind]


def step_us(job: Job) -> float:
    return SLOT_US * (len(schedule(job)) + 1)


def recorded_steps(job: Job, rank: int) -> range:
    first = 1 if rank in job.shifted else 0
    return range(first, first + job.steps)


def arrival(job: Job, rank: int, step: int, c: int) -> float:
    """True arrival of `rank` at the c-th collective of `step` (us)."""
    kind = schedule(job)[c][0]
    jitter = ((rank * 7 + c * 3 + step * 5) % 5) / 4 * job.jitter_us
    return step * step_us(job) + (c + 1) * SLOT_US + jitter + job.late.get((rank, kind), 0.0)


def truth(job: Job) -> list[dict[str, Any]]:
    """Every collective instance of every step any rank recorded: group, kind, step, c, the
    per-group sequence number, members' arrivals and the common true end."""
    out = []
    sched = schedule(job)
    steps = sorted({k for r in range(job.world) for k in recorded_steps(job, r)})
    for step in steps:
        for group, members in groups(job).items():
            for c, (kind, collective) in enumerate(sched):
                if group != group_of(job, members[0], kind) or len(members) < 2:
                    continue
                arrive = {r: arrival(job, r, step, c) for r in members}
                end = max(arrive.values()) + TRANSFER_US[kind]
                out.append({"group": group, "kind": kind, "collective": collective,
                            "step": step, "c": c, "seq": _seq(job, kind, step, c),
                            "arrive": arrive, "end": end})
    return out


def _seq(job: Job, kind: str, step: int, c: int) -> int:
    """The per-process-group sequence number of the c-th collective of `step` (from job start)."""
    sched = schedule(job)
    per_step = sum(1 for k, _ in sched if k == kind)
    return step * per_step + sum(1 for k, _ in sched[:c] if k == kind)


def true_ends(job: Job) -> dict[tuple[int, int, str], float]:
    """(step, c, group) -> the collective's true end (its latest member's arrival + transfer)."""
    out = {}
    sched = schedule(job)
    steps = sorted({k for r in range(job.world) for k in recorded_steps(job, r)})
    for name, ranks in groups(job).items():
        for c, (kind, _) in enumerate(sched):
            if group_of(job, ranks[0], kind) != name:
                continue
            for step in steps:
                out[(step, c, name)] = max(arrival(job, r, step, c) for r in ranks) + \
                    TRANSFER_US[kind]
    return out


def rank_document(job: Job, rank: int, ends: dict[tuple[int, int, str], float] | None = None
                  ) -> dict[str, Any]:
    ends = true_ends(job) if ends is None else ends
    offset = job.offsets.get(rank, 0.0)
    pid, device = 1000 + rank, rank % job.gpus_per_node
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_name", "pid": device, "tid": 0,
         "args": {"name": "python3"}},
        {"ph": "M", "name": "process_labels", "pid": device, "tid": 0,
         "args": {"labels": f"GPU {device}"}}]
    ext = 1
    sched = schedule(job)
    members = groups(job)
    for step in recorded_steps(job, rank):
        start = step * step_us(job) + offset
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                       "pid": pid, "tid": pid, "ts": start, "dur": step_us(job) - 1,
                       "args": {"External id": ext}})
        ext += 1
        for c, (kind, collective) in enumerate(sched):
            group = group_of(job, rank, kind)
            size = len(members[group])
            arrive = arrival(job, rank, step, c) + offset
            slot = start + (c + 1) * SLOT_US - SLOT_US / 2
            events += _gemm(pid, device, slot, arrive - slot - 50, ext)
            ext += 1
            end = ends[(step, c, group)] + offset
            args = {"External id": ext, "Collective name": COLLECTIVE_ARG[collective],
                    "Process Group Name": group, "Process Group Description": kind,
                    "Group size": size, "dtype": "Float", "In msg nelems": NELEMS[kind],
                    "Out msg nelems": NELEMS[kind]}
            if job.seq:
                args["Seq"] = _seq(job, kind, step, c)
            host = arrive - HOST_LEAD_US
            events.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms",
                           "pid": pid, "tid": pid, "ts": host, "dur": 20, "args": args})
            events.append({"ph": "X", "cat": "cpu_op", "name": f"nccl:{collective}",
                           "pid": pid, "tid": pid, "ts": host + 1, "dur": 18,
                           "args": {"External id": ext}})
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                           "pid": pid, "tid": pid, "ts": host + 2, "dur": 10,
                           "args": {"External id": ext, "correlation": ext}})
            events.append({"ph": "X", "cat": "kernel", "name": KERNELS[collective],
                           "pid": device, "tid": 20, "ts": arrive, "dur": end - arrive,
                           "args": {"External id": ext, "correlation": ext, "device": device,
                                    "stream": 20}})
            ext += 1
    document: dict[str, Any] = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": i, "name": job.gpu_name, "totalGlobalMem": 85_000_000_000,
                              "computeMajor": 9, "computeMinor": 0, "numSms": 132}
                             for i in range(job.gpus_per_node)],
        "distributedInfo": {
            "backend": "nccl", "rank": rank, "world_size": job.world,
            "pg_count": len(members),
            "pg_config": [{"pg_name": name, "pg_desc": "default_pg" if name == "0" else "",
                           "pg_size": len(ranks), "ranks": ranks}
                          for name, ranks in members.items()]},
        "traceEvents": events,
    }
    if job.hostnames:
        document["hostname"] = f"node{rank // job.gpus_per_node}"
    return document


def _gemm(pid: int, device: int, at: float, dur: float, ext: int) -> list[dict[str, Any]]:
    return [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": pid, "tid": pid, "ts": at,
             "dur": 15, "args": {"External id": ext}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid,
             "tid": pid, "ts": at + 2, "dur": 8, "args": {"External id": ext,
                                                           "correlation": ext}},
            {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_f32f32_tn", "pid": device,
             "tid": 7, "ts": at + 12, "dur": max(dur, 1.0),
             "args": {"External id": ext, "correlation": ext, "device": device, "stream": 7}}]


def realistic(world: int) -> Job:
    """A job shaped like a large MoE run: TP groups of 8 (one node each), DP groups across the
    nodes, 4 steps of 40 TP all-reduces, 16 EP all-to-alls over the world and 8 DP
    all-reduces (256 collectives and 256 GEMMs per rank), ranks jittered, rank 3 late at its
    TP collectives."""
    return Job(world=world, tp=min(8, world), steps=4, tp_calls=40, ep_calls=16, dp_calls=8,
               late={(3, "tp"): 150.0})


def write_job(job: Job, folder: Path, skip: frozenset[int] = frozenset()) -> list[Path]:
    """One `rank<r>.pt.trace.json` per rank (but the ranks in `skip`, missing files)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    ends = true_ends(job)
    for rank in range(job.world):
        if rank in skip:
            continue
        path = folder / f"rank{rank:04d}.pt.trace.json"
        path.write_text(json.dumps(rank_document(job, rank, ends)))
        paths.append(path)
    return paths
