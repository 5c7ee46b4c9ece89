"""`/distributed` (`analysis.distributed.view.build_distributed_view`,
`analysis.distributed.run`): communication
of every worker of one span, from per-rank summaries. Times are us (3 decimals); bandwidths
GB/s (1e9 bytes per second)."""

from typing import Annotated, Literal, Optional

from typing_extensions import TypedDict

from ...payloads.common import doc


class DistributedGpu(TypedDict):
    id: Annotated[int, doc("Device index.")]
    name: Annotated[Optional[str], doc("Device name; null when unknown.")]
    memory_bytes: Annotated[Optional[int], doc("Device memory, bytes; null when unknown.")]
    compute_capability: Annotated[Optional[str], doc('"major.minor"; null when unknown.')]


class DistributedDevice(TypedDict):
    """One worker and the GPUs it used."""

    worker: Annotated[str, doc("Worker name.")]
    node: Annotated[str, doc("Host name from the trace (`hostname`/`host_name`), else node "
                             "rank // G when every rank ran on GPU rank % G of G visible GPUs, "
                             "else from a hostname_pid worker name, else the worker.")]
    node_source: Annotated[Literal["hostname", "placement", "worker name", "worker"], doc(
        "Where `node` comes from (the same for every worker); \"worker\": nodes unknown.")]
    pid: Annotated[str, doc("Process id of the training process from the trace (the pid with "
                            "the most CPU ops), else from a hostname_pid worker name, else a "
                            "running index.")]
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
    unmatched: Annotated[float, doc(
        "Communication of collectives seen on this rank only while their group has more ranks "
        "(ranks missing from the run): neither transfer nor wait. Transfer + synchronizing + "
        "unmatched of a step is the overlap chart's communication time of that step.")]


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
    unmatched_calls: Annotated[int, doc("Calls seen on this rank only (ranks missing): no "
                                        "transfer counted for them.")]


class CommOps(TypedDict):
    rows: Annotated[list[CommOpRow], doc("The worker's communication ops.")]


class Coverage(TypedDict):
    """World size (`distributedInfo`) against the ranks present."""

    world_size: Annotated[Optional[int], doc("Largest world size of the traces; null when none "
                                             "says.")]
    ranks_present: Annotated[int, doc("Distinct ranks present (workers when no rank is known).")]
    ranks: Annotated[list[int], doc("The ranks present, sorted.")]
    missing: Annotated[int, doc("world_size - ranks_present (0 when unknown).")]
    missing_ranks: Annotated[list[int], doc("The first 32 missing ranks.")]
    complete: Annotated[bool, doc("No rank missing.")]
    message: Annotated[str, doc("The warning shown when ranks are missing, else empty.")]


class Clocks(TypedDict):
    """Which clock each number is on."""

    per_step: Annotated[str, doc("Clock of overlap and wait per step.")]
    skew: Annotated[str, doc("Clock of the arrival skew, waits and stragglers.")]
    aligned: Annotated[str, doc("Clock of aligned arrivals (the multi-rank timeline).")]
    offsets_us: Annotated[dict[str, float], doc(
        "Worker -> its clock minus the run's, estimated from collective ends, us; the run's "
        "clock is the lowest-index worker's of each set of workers sharing collectives.")]


class Matching(TypedDict):
    """How calls were matched across ranks into collectives."""

    by: Annotated[Literal["sequence", "order", "mixed", "none"], doc(
        "sequence: by (process group, record_param_comms Seq); order: by call order per "
        "group; mixed: per group (see groups); none: no communication.")]
    groups: Annotated[dict[str, str], doc('Process group -> "sequence" or "order".')]
    note: Annotated[str, doc("What that means for the numbers.")]


class GroupRow(TypedDict):
    """One process group: locality, traffic, bandwidth and its own straggler."""

    group: Annotated[str, doc("Process group name.")]
    size: Annotated[int, doc("Ranks in the group (n).")]
    ranks_present: Annotated[int, doc("Members with a trace in this run.")]
    workers: Annotated[list[str], doc("The first 16 members present.")]
    nodes: Annotated[Optional[int], doc("Distinct nodes of the members; null when unknown.")]
    locality: Annotated[Optional[Literal["intra-node", "inter-node"]], doc(
        "One node or several; null when nodes are unknown.")]
    link: Annotated[Optional[str], doc("NVLink, xGMI or the network link assumed.")]
    peak_gbps: Annotated[Optional[float], doc("That link's peak bus bandwidth per direction "
                                              "per GPU, GB/s; null when unknown.")]
    collectives: Annotated[int, doc("Matched collectives of the group.")]
    bytes: Annotated[int, doc("Sum of S over them, bytes.")]
    transfer_us: Annotated[float, doc("Sum of transfer times, us.")]
    busbw_gbps: Annotated[Optional[float], doc("Transfer-weighted mean bus bandwidth, GB/s.")]
    total_wait_us: Annotated[float, doc("Members' waiting at the group's collectives, us.")]
    straggler: Annotated[Optional[str], doc("The member imposing at least half of that "
                                            "waiting; null when none.")]
    straggler_share: Annotated[float, doc("Share of the group's waiting imposed by its top "
                                          "last arriver (0..1).")]


class Groups(TypedDict):
    total: Annotated[int, doc("Process groups with collectives.")]
    rows: Annotated[list[GroupRow], doc("Most waiting first; at most 256.")]


class CollectiveRow(TypedDict):
    """One logical collective: the seq-th call of `name` in process group `group` on every
    member rank."""

    id: Annotated[int, doc("Collective number, in the first rank's call order.")]
    group: Annotated[str, doc('Process group name ("Process Group Name"), "default" when the '
                              "trace gives none.")]
    name: Annotated[str, doc('Op name, e.g. "nccl:all_reduce".')]
    collective: Annotated[str, doc("all_reduce, all_gather, reduce_scatter, all_to_all, "
                                   "broadcast, reduce, send, recv, barrier, gather, scatter or "
                                   "other.")]
    seq: Annotated[int, doc("0-based call number of `name` in the group on each rank.")]
    step: Annotated[Optional[str], doc("Step of the call (device start, else host start, in the "
                                       "device-adjusted steps); null outside every step.")]
    ranks: Annotated[int, doc("Ranks present in the collective.")]
    group_size: Annotated[int, doc('Ranks in the group: "Group size", else the process group\'s '
                                   "size from pg_config, else the world size for the default "
                                   "group, else the ranks present.")]
    complete: Annotated[bool, doc("Every rank of the group is present.")]
    bytes: Annotated[int, doc("Size S (bus-bandwidth convention: all_gather the full output), "
                              "bytes; median over ranks.")]
    dtype: Annotated[Optional[str], doc("Element type; null when unknown.")]
    last_arriver: Annotated[Optional[str], doc(
        "Worker that arrived last (its wait is the shortest); null with one rank or no skew.")]
    skew_us: Annotated[Optional[float], doc("Arrival skew: longest minus shortest duration over "
                                            "the ranks, us; null with one rank.")]
    transfer_us: Annotated[Optional[float], doc(
        "Shortest duration over the ranks (kernel span, else host range), us; null when seen "
        "on one rank of a larger group.")]
    latency_us: Annotated[float, doc("Longest duration over the ranks, us.")]
    algbw_gbps: Annotated[Optional[float], doc("S / transfer, GB/s; null for a single-rank group "
                                               "or one rank present.")]
    busbw_gbps: Annotated[Optional[float], doc("algbw x the nccl-tests factor of the collective "
                                               "and group size, GB/s; null when none applies.")]


class Collectives(TypedDict):
    total: Annotated[int, doc("Logical collectives matched.")]
    shown: Annotated[int, doc("Rows in `rows` (at most 500: the largest skews).")]
    truncated: Annotated[bool, doc("total > shown.")]
    rows: Annotated[list[CollectiveRow], doc("In collective order.")]


class StragglerRow(TypedDict):
    worker: Annotated[str, doc("Worker.")]
    collectives: Annotated[int, doc("Collectives with a skew this rank took part in.")]
    last: Annotated[int, doc("Of those, how often it arrived last.")]
    last_by_collective: Annotated[dict[str, int], doc("Collective kind -> times last.")]
    imposed_wait_us: Annotated[float, doc("Wait of the other ranks at the collectives it "
                                          "arrived last at, us.")]
    imposed_share: Annotated[float, doc("imposed_wait_us / all waiting (0..1).")]
    waited_us: Annotated[float, doc("Its own wait for the last arriver, us.")]


class Stragglers(TypedDict):
    total: Annotated[int, doc("Workers.")]
    skewed_collectives: Annotated[int, doc("Collectives on more than one rank with a skew.")]
    total_wait_us: Annotated[float, doc("All ranks' waiting, us.")]
    rows: Annotated[list[StragglerRow], doc("Most imposed wait first; at most 256.")]


class BandwidthRow(TypedDict):
    """Bandwidth per collective kind and group size (nccl-tests conventions)."""

    collective: Annotated[str, doc("Collective kind.")]
    group_size: Annotated[int, doc("Ranks in the group (n).")]
    calls: Annotated[int, doc("Collectives with a bandwidth.")]
    bytes: Annotated[int, doc("Sum of S, bytes.")]
    transfer_us: Annotated[float, doc("Sum of transfer times, us.")]
    algbw_gbps: Annotated[float, doc("bytes / transfer_us, GB/s.")]
    bus_factor: Annotated[Optional[float], doc("all_reduce 2(n-1)/n; all_gather, reduce_scatter, "
                                               "all_to_all (n-1)/n; broadcast, reduce, send, "
                                               "recv 1; null otherwise.")]
    busbw_gbps: Annotated[Optional[float], doc("algbw x bus_factor, GB/s.")]
    peak_gbps: Annotated[Optional[float], doc("The GPUs' NVLink / xGMI peak per direction, "
                                              "GB/s, when every GPU is a known model; null "
                                              "otherwise.")]


class HeatByCollective(TypedDict):
    columns: Annotated[list[str], doc('Column labels ("name #seq", or a range when bucketed).')]
    column_steps: Annotated[list[str], doc("Step of each column's first collective.")]
    column_bucket: Annotated[int, doc("Collectives per column.")]
    values: Annotated[list[list[Optional[float]]], doc(
        "rows x columns: wait (arrival skew), us, the largest in the bucket; null where the "
        "rank has no such collective.")]


class HeatByStep(TypedDict):
    columns: Annotated[list[str], doc("Step names.")]
    values: Annotated[list[list[Optional[float]]], doc("rows x steps: summed wait, us.")]


class HeatMap(TypedDict):
    """Arrival skew of each rank (rows) per collective and per step."""

    rows: Annotated[list[str], doc("Row labels: workers, or ranges of workers when bucketed.")]
    rank_bucket: Annotated[int, doc("Workers per row (at most 128 rows).")]
    downsampled: Annotated[bool, doc("Rows or columns are buckets.")]
    note: Annotated[str, doc("Says how it was downsampled, else empty.")]
    collectives: Annotated[HeatByCollective, doc("Ranks x collectives (at most 200 columns).")]
    steps: Annotated[HeatByStep, doc("Ranks x steps.")]


class FsdpLayerRow(TypedDict):
    """All-gathers or reduce-scatters of one module (layer), over every rank."""

    module: Annotated[str, doc("Innermost enclosing module: the nn.Module name of a "
                               "`nn.Module: <Name>` event, or the module an FSDP record function "
                               "names in parentheses (`FSDP::pre_forward (layers.0)`).")]
    collective: Annotated[str, doc("all_gather or reduce_scatter.")]
    ranks: Annotated[int, doc("Ranks with such calls in the module.")]
    calls: Annotated[int, doc("Calls over every rank.")]
    bytes: Annotated[int, doc("Message bytes over the calls.")]
    time_us: Annotated[float, doc("Sum of the calls' durations (device span: first kernel start "
                                  "to last kernel end, else host range), us.")]
    overlap_us: Annotated[float, doc("Of time_us, the part overlapped by computation on the same "
                                     "rank (non-communication kernels; CPU ops without "
                                     "kernels), us.")]
    exposed_us: Annotated[float, doc("time_us - overlap_us, us.")]
    overlap_share: Annotated[float, doc("overlap_us / time_us (0..1): for all_gather, how much "
                                        "of the layer's gathering the prefetch hid.")]


class FsdpLayers(TypedDict):
    """All-gather / reduce-scatter grouped by module or layer, with prefetch overlap."""

    source: Annotated[str, doc('Where modules come from: "nn.Module", "FSDP annotations", both '
                               'joined by " + ", or empty when the traces have no module '
                               "events.")]
    total: Annotated[int, doc("(module, collective) groups.")]
    truncated: Annotated[bool, doc("More than 500 groups: the first 500 are sent.")]
    rows: Annotated[list[FsdpLayerRow], doc("First-seen order (lowest rank, call order).")]
    unattributed_calls: Annotated[int, doc("All-gathers and reduce-scatters outside every "
                                           "module event.")]
    unattributed_us: Annotated[float, doc("Their summed duration, us.")]
    note: Annotated[str, doc("Why there are no rows, else empty.")]


class DistributedPayload(TypedDict):
    """`/distributed`: the distributed view of one span over the run's usable workers."""

    workers: Annotated[list[str], doc("Workers included, sorted.")]
    devices: Annotated[list[DistributedDevice], doc("One entry per worker.")]
    steps: Annotated[list[str], doc("Step names over all workers, numeric order.")]
    overlap: Annotated[dict[str, dict[str, Overlap]], doc(
        '"all" (mean over the worker\'s steps) or a step name -> worker -> split, us.')]
    wait: Annotated[dict[str, dict[str, Wait]], doc(
        '"all" or a step name -> worker -> transfer/synchronizing/unmatched, us, on the '
        "rank's clock clipped to its steps (see `clocks`).")]
    comm_ops: Annotated[dict[str, CommOps], doc("Worker -> its communication-op table.")]
    messages: Annotated[list[str], doc("Caveats, the left-out workers first.")]
    skipped: Annotated[dict[str, str], doc("Workers left out (broken, or without this span) "
                                           "-> why.")]
    coverage: Annotated[Coverage, doc("World size vs ranks present.")]
    clocks: Annotated[Clocks, doc("Which clock each number is on.")]
    matching: Annotated[Matching, doc("Matched by sequence number or call order.")]
    groups: Annotated[Groups, doc("Per process group: locality, bandwidth, straggler.")]
    collectives: Annotated[Collectives, doc("Matched collectives.")]
    stragglers: Annotated[Stragglers, doc("Per rank: last arrivals and imposed wait.")]
    bandwidth: Annotated[list[BandwidthRow], doc("Per collective kind and group size.")]
    heatmap: Annotated[HeatMap, doc("Arrival skew, ranks x collectives and ranks x steps.")]
    recommendations: Annotated[list[str], doc("The straggler named with its evidence.")]
    fsdp: Annotated[bool, doc("The trace shows FSDP (FSDP record functions or "
                              "FullyShardedDataParallel); advice is worded for it.")]
    fsdp_layers: Annotated[FsdpLayers, doc("All-gather / reduce-scatter per module or layer "
                                           "with prefetch overlap (FSDP awareness).")]
