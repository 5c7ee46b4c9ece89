"""The catalogue replies (`/runs`, `/views`, `/workers`, `/spans`, `/status`, from
`server.store.RunStore`) and the two non-payload replies every data route may give: 202 while
loading and the error body."""

from typing import Annotated, Literal, Optional

from typing_extensions import NotRequired, TypedDict

from .common import ViewName, doc

SpanState = Literal["queued", "loading", "ok", "partial", "truncated", "error"]
"""partial: some events were malformed and skipped; truncated: the file is cut off (the events
before the cut are shown). A file modified in the last 30 s that stops mid-token, or whose
size changed between scans, is reported as still being written (loading) and is read again
when it changes; a file that ends in invalid JSON is reported at once."""


class SpanStatus(TypedDict):
    """The load state of one worker span (one trace file)."""

    span: Annotated[str, doc('Span id ("1", "2", ... or "default").')]
    state: Annotated[SpanState, doc("queued/loading: not parsed yet; ok; partial: malformed "
                                    "events skipped; truncated: file cut off; error: failed.")]
    messages: Annotated[list[str], doc("The parser's messages for the file.")]
    events: Annotated[Optional[int], doc("Events parsed; null until parsed, or when the file "
                                         "failed.")]
    memory_timeline: NotRequired[Annotated[bool, doc(
        "Whether a memory-timeline export (`*.raw.json.gz`) was written next to this span's "
        "trace: when false, `/memory/timeline` for this span is a 404, so clients need not "
        "ask.")]]


class WorkerListing(TypedDict):
    name: Annotated[str, doc("Worker name.")]
    spans: Annotated[list[SpanStatus], doc("The worker's spans, numeric order.")]


class Run(TypedDict):
    """One run (a folder of the logdir with traces or memory-timeline exports)."""

    name: Annotated[str, doc("Run name (its path under the logdir).")]
    state: Annotated[Literal["loading", "ready", "partial", "error"], doc(
        "loading: some file is queued or being parsed; error: every file failed; partial: some "
        "file failed or is partial/truncated; ready: all files parsed cleanly.")]
    progress: Annotated[float, doc("Fraction (0..1) of the run's bytes parsed.")]
    views: Annotated[list[ViewName], doc("Views offered by the files parsed so far, display "
                                         "order.")]
    workers: Annotated[list[WorkerListing], doc("Workers, sorted.")]


class RunListing(TypedDict):
    """`/runs`: every run, sorted by name, with per-worker-span load state."""

    runs: Annotated[list[Run], doc("Runs, sorted by name.")]
    loading: Annotated[bool, doc("The first scan runs, or some file is queued or being "
                                 "parsed.")]
    logdir: Annotated[str, doc("The logdir being served.")]
    notices: NotRequired[Annotated[list[str], doc(
        "Installation problems found at the plugin's start-up, for a banner (e.g. the old "
        "torch-tb-profiler still installed: two tabs). Empty when all is well; always sent by "
        "the plugin.")]]


class SpanStatusDetail(TypedDict):
    """`/status`: the load status of one worker span (200 whatever the state)."""

    run: Annotated[str, doc("Run name.")]
    worker: Annotated[str, doc("Worker name.")]
    span: Annotated[str, doc("Span id.")]
    state: Annotated[SpanState, doc("As in /runs.")]
    messages: Annotated[list[str], doc("The parser's messages.")]
    events: Annotated[Optional[int], doc("Events parsed; null until parsed or on failure.")]
    progress: Annotated[float, doc("Fraction (0..1) of the file parsed (4 decimals).")]


class Loading(TypedDict):
    """The 202 reply: the worker span (or every file of the run, for /views) is still loading;
    poll again after `retry_after_ms` (the Retry-After header says 1, HTTP's whole seconds)."""

    loading: Annotated[Literal[True], doc("Always true.")]
    progress: Annotated[float, doc("Fraction (0..1) parsed (4 decimals).")]
    state: Annotated[Literal["queued", "loading"], doc("Waiting in the queue, or being "
                                                       "parsed.")]
    retry_after_ms: Annotated[int, doc(
        "When to ask again, ms: the estimated rest of the parse from its progress rate so far, "
        "100 to 1000 (250 until its parser reports progress, 1000 while a file is queued).")]


class ErrorDetail(TypedDict):
    code: Annotated[int, doc("The HTTP status (400, 404, 405, 422, 500, 501).")]
    message: Annotated[str, doc("What went wrong (plain text).")]
    messages: NotRequired[Annotated[list[str], doc("With 422: the parser's messages for the "
                                                   "file.")]]


class Error(TypedDict):
    """Every 4xx/5xx JSON reply."""

    error: ErrorDetail


class ViewSpecEntry(TypedDict):
    name: Annotated[ViewName, doc("The view (tab) name, as `/views` and `/workers` use it.")]
    order: Annotated[int, doc("Display order, 1 first.")]
    run_level: Annotated[bool, doc("The view covers the whole run (e.g. Distributed): it is "
                                   "offered per run, not per worker file.")]


class ViewSpecs(TypedDict):
    """`/viewspecs`: every view the plugin has, in display order (the frontend's registry)."""

    views: Annotated[list[ViewSpecEntry], doc("Every view of the plugin, in display order.")]


ViewList = list[ViewName]
"""`/views`: the views the run offers, in display order."""

NameList = list[str]
"""`/workers` (sorted worker names offering the view) and `/spans` (span ids in numeric
order)."""


class DiffDefault(TypedDict):
    """`/diff/default`: the experiment the Diff view proposes for a baseline."""

    run: Annotated[Optional[str], doc("The proposed run; null when there is nothing to "
                                      "compare with.")]
    worker: Annotated[Optional[str], doc("Its worker.")]
    span: Annotated[Optional[str], doc("Its span.")]
    reason: Annotated[Literal["other_span", "other_worker", "similar_run", "none"], doc(
        "other_span: the same worker's other span; other_worker: another worker of the same "
        "run; similar_run: the run whose operator names overlap most; none: no candidate.")]
    similarity: Annotated[Optional[float], doc(
        "similar_run: shared operator names / all operator names of both (0..1).")]
    message: Annotated[str, doc("The choice in words, for the page's subtitle.")]
