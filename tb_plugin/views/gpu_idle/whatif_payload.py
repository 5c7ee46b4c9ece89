"""`/whatif` (`analysis.whatif.build_whatif`): predicted step times under edits."""

from typing import Annotated, Optional

from typing_extensions import TypedDict

from ...payloads.common import doc


class WhatIfStep(TypedDict):
    """One replayed step."""

    step: Annotated[str, doc("Step name (the N of ProfilerStep#N; \"0\" for a whole trace).")]
    original_us: Annotated[float, doc("The step's host length in the trace, us.")]
    predicted_us: Annotated[float, doc("Its predicted length under the edits, us.")]
    saving_us: Annotated[float, doc("original_us − predicted_us (negative: slower), us.")]
    saving_pct: Annotated[float, doc("saving_us as a share of original_us, %.")]
    replayed_us: Annotated[float, doc(
        "The unedited replay of the model: equals original_us (a check of the model).")]
    wait_us: Annotated[float, doc(
        "Time the step's thread waits for the device in the trace (syncs, blocking copies), "
        "us.")]
    predicted_wait_us: Annotated[float, doc("The same under the edits, us.")]
    calls: Annotated[int, doc("Runtime/driver calls replayed (top level per thread).")]
    device_events: Annotated[int, doc("Kernels, copies and sets they launched.")]


class WhatIfPayload(TypedDict):
    """Predicted step times when the edits are applied to the step's dependency model."""

    edits: Annotated[list[str], doc("The edits as read, e.g. `op:aten::mm=0.5`.")]
    original_us: Annotated[float, doc("Mean original step length over the replayed steps, us.")]
    predicted_us: Annotated[float, doc("Mean predicted step length, us.")]
    saving_us: Annotated[float, doc("original_us − predicted_us, us.")]
    saving_pct: Annotated[float, doc("saving_us as a share of original_us, %.")]
    steps: Annotated[list[WhatIfStep], doc("One entry per replayed step, in time order.")]
    notes: Annotated[list[str], doc("What the replay left out (steps beyond the limit...).")]


class WhatIfRunTimes(TypedDict):
    """Step times of the run-level replay (us, mean over steps)."""

    original_us: Annotated[float, doc("Measured step length (each rank's own clock), us.")]
    replayed_us: Annotated[float, doc(
        "The unedited replay of the ranks' chains (a check of the model), us.")]
    predicted_us: Annotated[float, doc("The replay under the edits, us.")]
    saving_us: Annotated[float, doc("replayed_us − predicted_us (negative: slower), us.")]
    saving_pct: Annotated[float, doc("saving_us as a share of replayed_us, %.")]


class WhatIfRunRank(WhatIfRunTimes):
    """One rank of the span."""

    worker: Annotated[str, doc("The worker.")]
    rank: Annotated[Optional[int], doc("Its rank from `distributedInfo`, null when unknown.")]
    wait_us: Annotated[float, doc("Its wait at collectives in the replay, per step, us.")]
    predicted_wait_us: Annotated[float, doc("The same under the edits, us.")]
    imposed_wait_us: Annotated[float, doc(
        "The others' wait at the collectives it arrived last at, per step, us.")]
    predicted_imposed_wait_us: Annotated[float, doc("The same under the edits, us.")]


class WhatIfRunStep(WhatIfRunTimes):
    """One step: the mean over the ranks that have it."""

    step: Annotated[str, doc("Step name.")]
    last: Annotated[Optional[str], doc(
        "The worker whose late arrivals imposed the most wait in the step; null: no wait.")]
    new_last: Annotated[Optional[str], doc("The same under the edits.")]


class WhatIfRunPayload(WhatIfRunTimes):
    """Predicted step times of a span's ranks under run-level edits
    (`analysis.whatif.ranks.build_whatif_run`)."""

    edits: Annotated[list[str], doc("The edits as read, e.g. `straggler=0`.")]
    resolved: Annotated[list[str], doc(
        "The edits with the rank they apply to, e.g. `rank:worker7=0` for `straggler=0`.")]
    last: Annotated[Optional[str], doc(
        "The worker imposing the most wait over the span; null: no wait.")]
    new_last: Annotated[Optional[str], doc("The same under the edits.")]
    ranks: Annotated[list[WhatIfRunRank], doc("One entry per rank, by worker name.")]
    steps: Annotated[list[WhatIfRunStep], doc("One entry per step, in step order.")]
    notes: Annotated[list[str], doc("What the replay could not model as stated.")]
    skipped: Annotated[dict[str, str], doc("Workers left out of the span: worker -> reason.")]
