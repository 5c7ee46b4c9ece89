"""`/whatif` (`analysis.whatif.build_whatif`): predicted step times under edits."""

from typing import Annotated

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
