"""`/findings`: what matters in one worker span, small enough for an agent's context
(`analysis.findings.build_findings`). Stable: fields are only added; a change of meaning bumps
`schema_version`."""

from typing import Annotated, Any, Literal, Optional

from typing_extensions import TypedDict

from ...payloads.common import doc
from ..overview.payload import RecommendationId

#: Bumped when a field of the findings changes meaning or is removed (added fields do not).
FINDINGS_SCHEMA_VERSION = 1


class FindingsTrace(TypedDict):
    """The file and what it holds."""

    state: Annotated[Literal["ok", "partial", "truncated", "error"], doc(
        "Parse state: ok, partial (malformed events skipped), truncated (cut short), error.")]
    events: Annotated[int, doc("Events kept by the parser.")]
    device: Annotated[Literal["GPU", "CPU"], doc("GPU when the trace has device work.")]
    gpus: Annotated[list[str], doc("Names of the GPUs that ran work (device index when the "
                                   "trace has no name).")]
    rank: Annotated[Optional[int], doc("This worker's rank; null outside distributed runs.")]
    world_size: Annotated[Optional[int], doc("Number of ranks; null outside distributed runs.")]


class HealthCheck(TypedDict):
    """One thing the trace can or cannot support."""

    id: Annotated[Literal["parse", "gpu", "steps", "graphs", "shapes", "call_stacks",
                          "memory", "modules", "flows"], doc("What is checked.")]
    ok: Annotated[bool, doc("False when the trace lacks it (the views named in `affects` "
                            "then show less or nothing).")]
    detail: Annotated[str, doc("What was found, in words.")]
    affects: Annotated[list[str], doc(
        "When not `ok`: the data views (`report --view` names) that then show less or nothing "
        "(`*`: all); empty when `ok`.")]


class FindingsSteps(TypedDict):
    """Step times (the Overview's steps)."""

    count: Annotated[int, doc("Steps analysed.")]
    from_markers: Annotated[bool, doc("False when the trace has no ProfilerStep#N markers "
                                      "(the whole trace is one step \"0\").")]
    mean_us: Annotated[float, doc("Mean step time, us (1 decimal).")]
    min_us: Annotated[Optional[float], doc("Shortest step, us (1 decimal); null without steps.")]
    max_us: Annotated[Optional[float], doc("Longest step, us (1 decimal); null without steps.")]
    slowest: Annotated[Optional[str], doc("Name of the longest step; null without steps.")]
    breakdown_pct: Annotated[dict[str, float], doc(
        "Mean share of the step time per category (%, 1 decimal), categories over 0 only, in "
        "the Overview's priority order.")]


class Pointer(TypedDict):
    """Where the detail is: a `report --view` name and its options (flag attribute names)."""

    view: Annotated[str, doc("A data view name (`report --view`, an MCP tool).")]
    options: Annotated[dict[str, Any], doc("Its options, by attribute name.")]
    why: Annotated[str, doc("What it shows.")]


class FindingsRecommendation(TypedDict):
    """One of the Overview's recommendations, in its order, without the links."""

    id: Annotated[RecommendationId, doc("The rule that fired (README: Recommendation ids).")]
    severity: Annotated[Literal["high", "medium", "low"], doc("The Overview's grade.")]
    title: Annotated[str, doc("Headline.")]
    text: Annotated[str, doc("Explanation with the measured value and threshold.")]
    metric: Annotated[float, doc("The measured value, in `unit`.")]
    unit: Annotated[str, doc("Unit of `metric`.")]
    saving_us: Annotated[Optional[float], doc("Predicted saving per step, us; null: unpriced.")]
    saving_pct: Annotated[Optional[float], doc("`saving_us` as % of the step time.")]
    evidence: Annotated[Optional[Pointer], doc(
        "The view and options that show the evidence (a time range on the Trace view when the "
        "rule has one, else the view that proves it).")]
    whatif: Annotated[Optional[str], doc("The fix as a `whatif` edit; null when not one edit.")]


class FindingsPayload(TypedDict):
    """What matters in one worker span, as compact JSON (at most about 8 KB)."""

    schema_version: Annotated[int, doc("Bumped when a field changes meaning or is removed.")]
    trace: Annotated[FindingsTrace, doc("The file and what it holds.")]
    health: Annotated[list[HealthCheck], doc("What the trace can and cannot support.")]
    steps: Annotated[FindingsSteps, doc("Step time and its breakdown.")]
    gpus: Annotated[list[dict[str, Optional[float]]], doc(
        "Per GPU that ran work: utilization_pct, sm_efficiency_pct, achieved_occupancy_pct, "
        "tensor_core_pct, mfu_pct (the Overview's GPU summary; null where unknown).")]
    recommendations: Annotated[list[FindingsRecommendation], doc(
        "The first `top` of the Overview's recommendations.")]
    recommendations_total: Annotated[int, doc("How many the Overview has in all.")]
    top_operators: Annotated[list[dict[str, Any]], doc(
        "The five operators with the most self time (device self time when the trace has "
        "device work, else host): name, self_us, self_pct of all operators' self time.")]
    pointers: Annotated[list[Pointer], doc("Views that hold the detail.")]
    notes: Annotated[list[str], doc("The Overview's caveats.")]
