"""What-if edits: what to change in a step, written as `TARGET=FACTOR` (the factor multiplies
the target's time: 0 removes it, 0.5 halves it, 2 doubles it; 0 <= factor <= 100).

Targets:
- `op:NAME` / `op~REGEX`: host operators, annotations or Python functions named NAME (exactly) or
  matching REGEX (searched): their host time (everything inside them, launch calls included) and
  the device work they launch;
- `kernel:NAME` / `kernel~REGEX`: device events (kernels, copies, sets) by name;
- `dataloader`: host time inside DataLoader calls (`enumerate(DataLoader)...`);
- `communication`: communication kernels and host communication calls;
- `memcpy`: memory copies and sets on the device;
- `launch`: the duration of launch calls (`launch=0`: as a CUDA/HIP graph replay would);
- `sync`: the time synchronising calls (and blocking copies) wait for the device (`sync=0`:
  the call no longer waits).
Several edits are separated by `;`.

Run-level targets (`parse_edits(text, RUN_TARGETS)`, replayed across the ranks of a span by
`ranks.build_whatif_run`):
- `rank:NAME`: one rank's lateness (NAME: a worker, or its rank number): each of its segments
  between collectives becomes `median + FACTOR x (own - median)`, the median of the other ranks'
  same segments (`rank:NAME=0`: it runs like the median rank);
- `straggler`: the same for the rank that imposes the most wait (the Distributed view's
  straggler), whoever it is;
- `transfer`: the collectives' transfer time (the shortest rank's duration in each);
  `transfer=0` overlaps communication fully with computation: a collective still ends only when
  its last rank arrives, but costs nothing after that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

TARGETS = ("op", "kernel", "dataloader", "communication", "memcpy", "launch", "sync")
RUN_TARGETS = ("rank", "straggler", "transfer")
_NAMED = ("op", "kernel", "rank")
MAX_FACTOR = 100.0
MAX_EDITS = 16
_EDIT = re.compile(r"^\s*(?P<target>[a-z]+)(?:(?P<how>[:~])(?P<name>.+?))?\s*=\s*(?P<factor>\S+)"
                   r"\s*$")


class EditError(ValueError):
    """An edit that cannot be read; the message names it and says why."""


@dataclass(frozen=True)
class Edit:
    target: str  # one of TARGETS
    factor: float
    name: Optional[str] = None  # op/kernel: the exact name...
    pattern: Optional[str] = None  # ...or a regular expression

    def matches(self, name: str) -> bool:
        if self.name is not None:
            return name == self.name
        return self.pattern is not None and re.search(self.pattern, name) is not None

    def __str__(self) -> str:
        if self.name is not None:
            return f"{self.target}:{self.name}={self.factor:g}"
        if self.pattern is not None:
            return f"{self.target}~{self.pattern}={self.factor:g}"
        return f"{self.target}={self.factor:g}"


def parse_edits(text: str, targets: tuple[str, ...] = TARGETS) -> list[Edit]:
    """`op:aten::mm=0.5; launch=0` -> edits of `targets`; EditError on anything else."""
    parts = [p for p in text.split(";") if p.strip()]
    if not parts:
        raise EditError("no edit given: write TARGET=FACTOR, e.g. op:aten::mm=0.5 or launch=0")
    if len(parts) > MAX_EDITS:
        raise EditError(f"{len(parts)} edits: at most {MAX_EDITS}")
    return [_parse(part, targets) for part in parts]


def _parse(part: str, targets: tuple[str, ...]) -> Edit:
    match = _EDIT.match(part)
    if match is None:
        raise EditError(f"cannot read edit {part.strip()!r}: write TARGET=FACTOR")
    target, how, name = match["target"], match["how"], match["name"]
    if target not in targets:
        other = RUN_TARGETS if targets is TARGETS else TARGETS
        where = (" (a run-level edit: the whatif_run view)" if other is RUN_TARGETS else
                 " (an edit of one worker: the whatif view)") if target in other else ""
        raise EditError(f"unknown target {target!r} in {part.strip()!r}{where}: one of "
                        f"{', '.join(targets)}")
    try:
        factor = float(match["factor"])
    except ValueError:
        raise EditError(f"factor {match['factor']!r} of {part.strip()!r} is not a number") \
            from None
    if not 0.0 <= factor <= MAX_FACTOR:  # NaN fails too
        raise EditError(f"factor {match['factor']} of {part.strip()!r} is outside "
                        f"[0, {MAX_FACTOR:g}]")
    named = target in _NAMED
    if named != (how is not None):
        raise EditError(f"{target!r} {'needs' if named else 'takes no'} a name "
                        f"({_spelling(target)})")
    if target == "rank" and how == "~":
        raise EditError(f"{part.strip()!r}: a rank is named exactly (rank:NAME)")
    if how == "~":
        try:
            re.compile(name)
        except re.error as error:
            raise EditError(f"bad regular expression {name!r}: {error}") from None
        return Edit(target, factor, pattern=name)
    return Edit(target, factor, name=name)


def _spelling(target: str) -> str:
    if target == "rank":
        return "rank:NAME"
    return f"{target}:NAME or {target}~REGEX" if target in _NAMED else f"{target}=FACTOR"
