"""The usable workers of one span of a run, with the reason each other worker is left out.

A run-level view of one span (Distributed) covers every worker that recorded that span and
could be read. The server (over its catalogue of load states) and the CLI (over tables it
parses itself) both gather the workers here, so they leave out the same workers for the same
reasons and fail with the same messages. Neither may import the other: this module sits above
ingest and below both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Callable, Generic, Optional, TypeVar

from .ingest.schema import LoadState

F = TypeVar("F")

#: Parse outcomes; any other state (queued, loading) means the file is not parsed yet.
OUTCOMES = (LoadState.OK, LoadState.PARTIAL, LoadState.TRUNCATED, LoadState.ERROR)
UNREADABLE = "the file could not be read"

#: (state, messages) of one file: a `LoadState` once parsed, anything else while pending.
Report = Callable[[F], tuple[str, list[str]]]


class NoWorkerHasSpan(LookupError):
    """No worker of the run recorded this span."""


class NoWorkerReadable(ValueError):
    """Workers recorded this span, but none of their files could be read."""

    def __init__(self, message: str, skipped: dict[str, str]) -> None:
        super().__init__(message)
        self.message, self.skipped = message, skipped

    def details(self) -> list[str]:
        return [f"{worker}: {why}" for worker, why in self.skipped.items()]


@dataclass
class SpanWorkers(Generic[F]):
    usable: dict[str, F] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # worker -> why it is left out
    pending: list[F] = field(default_factory=list)  # not parsed yet: neither usable nor skipped

    def require(self, run: str, span: str) -> tuple[dict[str, F], dict[str, str]]:
        """(usable, skipped) when some worker is usable; else why none is."""
        if self.usable:
            return self.usable, self.skipped
        if all(why.startswith(_NO_SPAN) for why in self.skipped.values()):
            raise NoWorkerHasSpan(f"no worker of run {quote(run)} has span {quote(span)}")
        raise NoWorkerReadable(f"no worker of span {quote(span)} could be read", self.skipped)


def span_workers(span: str, files: Iterable[tuple[str, Optional[F]]], report: Report
                 ) -> SpanWorkers[F]:
    """Sort each worker's file of `span` (None: the worker has no such span) by its report."""
    found: SpanWorkers[F] = SpanWorkers()
    for worker, file in files:
        if file is None:
            found.skipped[worker] = f"{_NO_SPAN} {quote(span)}"
            continue
        state, messages = report(file)
        if state not in OUTCOMES:
            found.pending.append(file)
        elif state == LoadState.ERROR:
            found.skipped[worker] = messages[0] if messages else UNREADABLE
        else:
            found.usable[worker] = file
    return found


def quote(value: str, limit: int = 120) -> str:
    """A name from a request or a logdir, shown in a message: repr, cut at `limit` chars."""
    text = value if len(value) <= limit else value[:limit] + "..."
    return repr(text)


_NO_SPAN = "the worker has no span"
