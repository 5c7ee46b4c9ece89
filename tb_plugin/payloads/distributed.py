"""`/distributed` (`analysis.report.build_distributed_view`): communication of every worker of
one span. Times are us (3 decimals)."""

from typing import Annotated, Optional

from typing_extensions import TypedDict

from .common import doc


class DistributedGpu(TypedDict):
    id: Annotated[int, doc("Device index.")]
    name: Annotated[Optional[str], doc("Device name; null when unknown.")]
    memory_bytes: Annotated[Optional[int], doc("Device memory, bytes; null when unknown.")]
    compute_capability: Annotated[Optional[str], doc('"major.minor"; null when unknown.')]


class DistributedDevice(TypedDict):
    """One worker and the GPUs it used."""

    worker: Annotated[str, doc("Worker name.")]
    node: Annotated[str, doc("Host name from a hostname_pid worker name, else the worker.")]
    pid: Annotated[str, doc("Process id from a hostname_pid worker name, else a running "
                            "index.")]
    backend: Annotated[Optional[str], doc('Process-group backend ("nccl", "gloo"); null when '
                                          "the trace does not say.")]
    rank: Annotated[Optional[int], doc("Rank; null when the trace does not say.")]
    world_size: Annotated[Optional[int], doc("Number of ranks; null when unknown.")]
    gpus: Annotated[list[DistributedGpu], doc("GPUs that ran device work.")]


class Overlap(TypedDict):
    """Exclusive split of step time, us."""

    computation: Annotated[float, doc("Computation only (kernels, or CPU ops without kernels).")]
    overlap: Annotated[float, doc("Computation and communication at once.")]
    communication: Annotated[float, doc("Communication only.")]
    other: Annotated[float, doc("Neither.")]


class Wait(TypedDict):
    """Communication time split, us."""

    transfer: Annotated[float, doc("Data transfer (after every rank arrived).")]
    synchronizing: Annotated[float, doc("Waiting for the other ranks.")]


class CommOpRow(TypedDict):
    """One communication op name of one worker."""

    name: Annotated[str, doc('Op name, e.g. "nccl:all_reduce".')]
    calls: Annotated[int, doc("Number of calls.")]
    total_bytes: Annotated[int, doc("Bytes moved by all calls.")]
    avg_bytes: Annotated[int, doc("Bytes per call (rounded).")]
    total_latency_us: Annotated[float, doc("Time from call to completion, summed, us.")]
    avg_latency_us: Annotated[float, doc("Per call, us.")]
    total_transfer_us: Annotated[float, doc("Transfer time, summed, us.")]
    avg_transfer_us: Annotated[float, doc("Per call, us.")]


class CommOps(TypedDict):
    rows: Annotated[list[CommOpRow], doc("The worker's communication ops.")]


class DistributedPayload(TypedDict):
    """`/distributed`: the distributed view of one span over the run's usable workers."""

    workers: Annotated[list[str], doc("Workers included, sorted.")]
    devices: Annotated[list[DistributedDevice], doc("One entry per worker.")]
    steps: Annotated[list[str], doc("Step names over all workers, numeric order.")]
    overlap: Annotated[dict[str, dict[str, Overlap]], doc(
        '"all" (mean over the worker\'s steps) or a step name -> worker -> split, us.')]
    wait: Annotated[dict[str, dict[str, Wait]], doc(
        '"all" or a step name -> worker -> transfer/synchronizing, us.')]
    comm_ops: Annotated[dict[str, CommOps], doc("Worker -> its communication-op table.")]
    messages: Annotated[list[str], doc("Caveats, the left-out workers first.")]
    skipped: Annotated[dict[str, str], doc("Workers left out (broken, or without this span) "
                                           "-> why.")]
