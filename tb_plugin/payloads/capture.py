"""The replies of the capture routes (`/capture/targets`, `/capture`, `/capture/status`):
capture on demand from the UI (`server/capture_routes.py`, `tb_plugin/capture/`)."""

from typing import Annotated, Literal, Optional

import msgspec
from typing_extensions import TypedDict

from .common import doc

#: Most steps one request may record (a trace of 1000 steps is already hundreds of MB).
MAX_STEPS = 1000


class CaptureForm(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The body of `POST /capture` (JSON): which run, how many steps, which options."""

    run: Annotated[str, msgspec.Meta(min_length=1, max_length=1024, description=(
        "A run from `/capture/targets`."))]
    steps: Annotated[int, msgspec.Meta(ge=1, le=MAX_STEPS, description=(
        "Steps to record after one warm-up step."))] = 5
    memory_snapshot: Annotated[bool, msgspec.Meta(description=(
        "Also dump a CUDA allocator snapshot beside each trace (CUDA jobs only)."))] = False
    with_stack: Annotated[bool, msgspec.Meta(description="Record Python stacks.")] = False
    record_shapes: Annotated[bool, msgspec.Meta(description="Record input shapes.")] = True
    profile_memory: Annotated[bool, msgspec.Meta(description="Record allocations.")] = True


class CaptureTarget(TypedDict):
    run: Annotated[str, doc("A run folder where a job listens (its path under the logdir).")]
    workers: Annotated[list[str], doc("The listening processes' worker names, sorted.")]


class CaptureTargets(TypedDict):
    """`/capture/targets`: whether capture is enabled and which runs listen."""

    enabled: Annotated[bool, doc("TensorBoard was started with TORCH_PROF_ALLOW_CAPTURE=1; "
                                 "when false, `POST /capture` answers 403.")]
    message: Annotated[str, doc("Why capture is disabled, or how to make a job listen.")]
    runs: Annotated[list[CaptureTarget], doc("Runs with a listening job, sorted.")]


class CaptureAccepted(TypedDict):
    """`POST /capture`: the request was written into the run folder."""

    id: Annotated[str, doc("The request id, for `/capture/status`.")]
    run: Annotated[str, doc("The run asked.")]
    expected: Annotated[int, doc("Workers listening when the request was written.")]


class WorkerCaptureStatus(TypedDict):
    id: Annotated[str, doc("The request id.")]
    worker: Annotated[str, doc("The worker that answers.")]
    rank: Annotated[Optional[int], doc("Its rank, null when not distributed.")]
    state: Annotated[Literal["accepted", "recording", "written", "failed"], doc(
        "accepted: seen; recording: `step` of `steps` recorded; written: `files` are in the "
        "run folder; failed: `reason`.")]
    step: Annotated[int, doc("Steps recorded so far.")]
    steps: Annotated[int, doc("Steps asked for.")]
    files: Annotated[list[str], doc("File names written (trace, allocator snapshot).")]
    reason: Annotated[str, doc("Why it failed; empty otherwise.")]
    notes: Annotated[list[str], doc("What was asked and not done (a memory snapshot without "
                                    "CUDA), or the job stopping early.")]
    updated_at: Annotated[float, doc("When the worker wrote this status (Unix seconds).")]


class CaptureProgress(TypedDict):
    """`/capture/status`: every worker's answer to one request."""

    id: Annotated[str, doc("The request id.")]
    expected: Annotated[int, doc("Workers listening when the request was written.")]
    workers: Annotated[list[WorkerCaptureStatus], doc("The answers so far, by worker name.")]
    done: Annotated[bool, doc("Every expected worker wrote or failed.")]
