"""Synthesize a multi-GB trace by replicating the steps of a real recorded one.

Recording 4 GB with torch would need ~35 GB of RAM for Kineto's buffers (about 9x the JSON), so
``--huge`` builds it instead, textually, from a real recorded trace (the "base"):

* the base's events array is split into a head (``ph: M`` metadata), a body (all profiler steps:
  ops, annotations, fwd/bwd flow events) and a tail (the ``Spans`` trace event, the iteration and
  record-window instant events);
* the body is written ``K`` times; copy ``k`` has its integer fields shifted so the result is a
  consistent, longer recording rather than duplicates: ``ts`` += ``k * period`` (period = the
  base's profiling window + 1 ms), ``External id`` / ``Ev Idx`` / ``Sequence number`` and flow
  ``id`` += ``k * (max + 1)``, ``ProfilerStep#n`` += ``k * steps``;
* the tail's profiler span ``dur`` and the ``Record Window End`` ``ts`` are stretched to cover
  all copies. Kineto's own formatting is kept byte for byte, so bytes per event match a real trace.

Only the integer part of each number is rewritten (the fractional digits are left as they are),
which keeps microsecond timestamps exact without float round-off.
"""

from __future__ import annotations

import math
import re
import shutil
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

from benchpaths import MIB, TRACE_SUFFIX, TRACES, log
from tracegen import TraceInfo, finish_trace, load_existing

SEP = "\n  },\n  {"  # Kineto's separator between two top-level trace events
_SLOT = re.compile(
    r'"ts": (?P<ts>\d+)|"External id": (?P<ext>\d+)|"Ev Idx": (?P<idx>\d+)'
    r'|"Sequence number": (?P<seq>\d+)|"id": (?P<flow>\d+)|ProfilerStep#(?P<step>\d+)'
)
_KINDS = ("ts", "ext", "idx", "seq", "flow", "step")
_KIND_INDEX = {name: i for i, name in enumerate(_KINDS)}


@dataclass
class Template:
    """A body split once into static text and integer slots, so each copy is a cheap join."""

    statics: list[str]
    kinds: list[int]
    values: list[int]

    def render(self, shifts: tuple[int, ...]) -> str:
        """The body with every slot shifted by the offset for its kind."""
        numbers = [str(v + shifts[k]) for k, v in zip(self.kinds, self.values)]
        return "".join(chain.from_iterable(zip(self.statics, numbers))) + self.statics[-1]

    def max_of(self, *kinds: str) -> int:
        """Largest value among slots of the given kinds (0 if none)."""
        wanted = {_KIND_INDEX[k] for k in kinds}
        return max((v for k, v in zip(self.kinds, self.values) if k in wanted), default=0)


def build_template(body: str) -> Template:
    """Cut the body at every integer we must rewrite."""
    statics: list[str] = []
    kinds: list[int] = []
    values: list[int] = []
    pos = 0
    for match in _SLOT.finditer(body):
        name = match.lastgroup or ""
        start, end = match.span(name)
        statics.append(body[pos:start])
        kinds.append(_KIND_INDEX[name])
        values.append(int(match.group(name)))
        pos = end
    statics.append(body[pos:])
    return Template(statics, kinds, values)


@dataclass
class SplitTrace:
    """A Kineto JSON text cut into the parts the synthesizer treats differently."""

    prologue: str  # file start .. first body event (header, traceEvents, M events)
    body: str  # all step events, joined by SEP
    tail: list[str]  # trailing events (Spans, instant markers), without separators
    epilogue: str  # the array's closing and the trailer fields


def split_trace(text: str) -> SplitTrace:
    """Split at Kineto's event separators; the Spans event marks where the tail starts."""
    array_start = text.index('"traceEvents": [') + len('"traceEvents": [')
    array_end = text.rindex("}\n  ]") + 1
    blocks = text[array_start:array_end].split(SEP)
    first_body = next(i for i, b in enumerate(blocks) if '"ph": "X"' in b)
    first_tail = next(i for i, b in enumerate(blocks) if '"pid": "Spans"' in b)
    head = SEP.join(blocks[:first_body]) + SEP
    return SplitTrace(
        prologue=text[:array_start] + head,
        body=SEP.join(blocks[first_body:first_tail]),
        tail=blocks[first_tail:],
        epilogue=text[array_end:],
    )


def _span_dur(tail: list[str]) -> float:
    """Length (us) of the profiling window, from the tail's Spans trace event."""
    span = next(b for b in tail if '"pid": "Spans"' in b and '"dur": ' in b)
    return float(re.search(r'"dur": ([0-9.]+)', span).group(1))


def _stretch_tail(tail: list[str], extra_us: int) -> list[str]:
    """Make the profiler span and the record-window end cover all the copies."""
    out = []
    for block in tail:
        if '"pid": "Spans"' in block and '"dur": ' in block:
            block = re.sub(
                r'"dur": ([0-9.]+)', lambda m: f'"dur": {float(m[1]) + extra_us:.3f}', block
            )
        elif "Record Window End" in block:
            block = re.sub(r'"ts": (\d+)', lambda m: f'"ts": {int(m[1]) + extra_us}', block)
        out.append(block)
    return out


def _shifts(template: Template, period_us: int) -> tuple[int, ...]:
    """Per-copy offsets, in ``_KINDS`` order: how far copy 1 moves from copy 0."""
    ids = template.max_of("seq", "flow") + 1  # flow ids are sequence numbers
    return (
        period_us,
        template.max_of("ext") + 1,
        template.max_of("idx") + 1,
        ids,
        ids,
        template.max_of("step"),
    )


def pick_base(traces: list[TraceInfo]) -> TraceInfo:
    """The largest real recording up to 256 MB (bounded RAM while templating), else the smallest."""
    real = sorted((t for t in traces if not t.synthetic), key=lambda t: t.bytes)
    small = [t for t in real if t.bytes <= 256 * MIB]
    return small[-1] if small else real[0]


def synthesize(base: TraceInfo, target_mb: int) -> TraceInfo:
    """Write ``<target>mb-synth/`` from ``base`` (reused by the caller when already present)."""
    label = f"{target_mb}mb-synth"
    text = Path(base.path).read_text(encoding="utf-8")
    parts = split_trace(text)
    del text
    template = build_template(parts.body)
    copies = max(1, round((target_mb * MIB - len(parts.prologue)) / (len(parts.body) + len(SEP))))
    period = math.ceil(_span_dur(parts.tail)) + 1000
    step = _shifts(template, period)
    log(f"synthesizing {label}: {copies} copies of {base.size_label}'s {base.steps} steps")
    partial = TRACES / f"{label}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    out_path = partial / f"synth.{Path(base.path).name.split('.')[1]}{TRACE_SUFFIX}"
    with out_path.open("w", encoding="utf-8") as out:
        out.write(parts.prologue)
        for k in range(copies):
            out.write(SEP if k else "")
            out.write(template.render(tuple(k * s for s in step)))
            if k % 10 == 0:
                log(f"  copy {k + 1}/{copies}")
        out.write(SEP + SEP.join(_stretch_tail(parts.tail, (copies - 1) * period)))
        out.write(parts.epilogue)
    final = TRACES / label
    shutil.rmtree(final, ignore_errors=True)
    partial.rename(final)
    return finish_trace(label, final, base.steps * copies, synthetic=True)


def ensure_huge(traces: list[TraceInfo], target_mb: int) -> TraceInfo:
    """Reuse ``<target>mb-synth`` if already built, else synthesize it from the best base."""
    existing = load_existing(f"{target_mb}mb-synth")
    if existing is not None:
        log(f"reusing {existing.size_label}: {existing.mb:.0f} MB, {existing.events:,} events")
        return existing
    info = synthesize(pick_base(traces), target_mb)
    log(f"{info.size_label}: {info.mb:.0f} MB, {info.events:,} events")
    return info
