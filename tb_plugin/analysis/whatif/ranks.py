"""Run-level what-if: replay the ranks of one span on their collective dependencies
(`build_whatif_run`), from the ranks' distributed summaries only (no table, no file).

The model. Collectives are matched across ranks by `analysis.distributed.match` (per process
group, the n-th call of a name on every member rank is one collective). Each rank is a chain
of points on its own clock, in time order: its step starts and ends (the summary's
device-adjusted steps) and its collectives inside them (arrival: first communication kernel
start, else host start; its duration `d`: kernel span, else host range). Between two points
(`("coll", id)`, `("start", step)`, `("end", step)`) lies a *segment*, the rank's own work: the
same segment on another rank has the same points at both ends or, where no other rank has that
pair, ends at the same point (a rank that skipped a collective). A
collective starts on every rank that recorded it when the last of them arrives and lasts its
transfer time (the shortest `d` over the ranks, as the Distributed view counts it); a
collective only one rank recorded keeps that rank's own `d` (nobody to wait for). Each rank
starts at its first point on the run clock (its trace clock minus the clock offset estimated
from collective ends, `match.clock_offsets`), so the unedited replay reproduces the measured
steps up to what the chain leaves out (calls overlapping on one rank, clock drift; `replayed_us`
beside `original_us` checks it); collectives recorded in different orders on
different ranks would deadlock the replay: the blocked collective is then released with the
ranks that arrived (a note says so).

Edits (`edits.RUN_TARGETS`): `rank:NAME=F` sets each of that rank's segments to
`median + F x (own - median)`, the median over the other ranks' same segments (a segment no
other rank has is kept); `straggler=F` the same for the rank imposing the most wait
(`distributed.tables.straggler_rows`, the Distributed view's rule; a note when nobody imposes
any); `transfer=F` multiplies every collective's transfer time (`transfer=0`: communication
fully overlapped with computation; the last arrival still gates each collective).

Output, per rank and for the span (the mean over the ranks, per step): original, replayed and
predicted step time (us, mean over steps), the saving (replayed minus predicted: what the edits
change in the model, as a share of the replayed time), the waits, and the *last* rank: the one
whose late arrivals imposed the most wait (the sum over the collectives it arrived last at of
the other ranks' waits there; of ranks arriving together the first by name is the last; ties:
the first worker by name; None without any wait) before and after the edits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pandas as pd

from ..distributed.match import call_frame, clock_offsets, group_sizes, match, with_waits
from ..distributed.run import SummaryInput, as_summary
from ..distributed.summary import RankSummary
from ..distributed.tables import straggler_rows
from .edits import Edit, EditError

PIECE, MARK, COLL = 0, 1, 2
_ORDER = {"end": 0, "start": 1, "coll": 2}  # at equal times: a step ends, the next starts


@dataclass
class Chain:
    """One rank's points and segments in time order."""

    kinds: list[int] = field(default_factory=list)
    keys: list[tuple[Any, Any]] = field(default_factory=list)  # segment: (from, to) points
    durs: list[float] = field(default_factory=list)  # segment: us; collective: own d
    start: float = 0.0  # its first point on the run clock

    def add(self, kind: int, key: tuple[Any, Any], dur: float) -> None:
        self.kinds.append(kind)
        self.keys.append(key)
        self.durs.append(dur)


@dataclass
class Replay:
    marks: list[dict[tuple[str, Any], float]]
    waits: list[tuple[int, int, float]]  # (collective id, last rank index, wait it imposed)
    own_wait: np.ndarray  # per rank: summed wait, us
    released: list[int]


@dataclass
class Matching:
    workers: list[str]
    summaries: dict[str, RankSummary]
    keyed: pd.DataFrame
    matched: pd.DataFrame
    offsets: np.ndarray


def matching(inputs: dict[str, SummaryInput]) -> Matching:
    """The ranks' collectives matched as the Distributed view matches them."""
    workers = sorted(inputs)
    summaries = {w: as_summary(inputs[w]) for w in workers}
    calls = call_frame(summaries)
    sizes, world = group_sizes(summaries)
    matched = match(calls, sizes, world)
    if len(calls):
        keyed = with_waits(calls, matched)
        offsets = clock_offsets(keyed, len(workers))
    else:
        keyed = calls.assign(id=[], wait=[], matched=[], transfer=[])
        offsets = np.zeros(len(workers))
    return Matching(workers, summaries, keyed, matched, offsets)


def build_whatif_run(inputs: dict[str, SummaryInput], edits: list[Edit]) -> dict[str, Any]:
    """Predicted step times of the span's ranks under `edits` (see the module docstring);
    EditError for a rank that is not in the span."""
    return replay_run(matching(inputs), edits)


def replay_run(m: Matching, edits: list[Edit]) -> dict[str, Any]:
    """`build_whatif_run` on collectives already matched."""
    notes: list[str] = []
    chains = [_chain(m, w) for w in range(len(m.workers))]
    members, transfer, step_of = _collectives(m, chains)
    base = _replay(chains, [c.durs for c in chains], members, transfer, 1.0)
    durs, resolved = _edited(m, chains, edits, notes)
    factor = float(np.prod([e.factor for e in edits if e.target == "transfer"]))
    changed = _replay(chains, durs, members, transfer, factor)
    if base.released or changed.released:
        notes.append(f"{len(set(base.released) | set(changed.released))} collectives were "
                     "recorded in different orders on different ranks: replayed without "
                     "waiting for the ranks that had not arrived")
    return _shape(m, edits, resolved, base, changed, step_of, notes)


def largest_imposed_wait(m: Matching, worker: str) -> Optional[dict[str, Any]]:
    """The collective at which `worker`, arriving last, made the others wait longest in all:
    its step, the wait's range on `worker`'s clock (from the first other rank's arrival,
    `arrival - skew`, clipped to the step's start, to its own arrival) and that range's offset
    from the step's start."""
    if worker not in m.workers or not len(m.matched):
        return None
    w = m.workers.index(worker)
    cross = m.matched[(m.matched["present"] > 1) & (m.matched["skew"] > 0)
                      & (m.matched["last"] == w)]
    if not len(cross):
        return None
    imposed = m.keyed[m.keyed["id"].isin(cross["id"])].groupby("id")["wait"].sum()
    best = int(imposed.idxmax())  # ties: the first collective
    row = m.keyed[(m.keyed["id"] == best) & (m.keyed["w"] == w)].iloc[0]
    skew = float(cross.loc[cross["id"] == best, "skew"].iloc[0])
    steps = m.summaries[worker].steps
    step = int(row["step"])
    end = float(row["arrive_at"])
    start = max(end - skew, steps.starts[step]) if step >= 0 else end - skew
    return {"step": steps.names[step] if step >= 0 else None,
            "offset_us": round(start - steps.starts[step], 2) if step >= 0 else None,
            "start_us": start, "end_us": end, "wait_us": float(imposed[best])}


def straggler_of(m: Matching) -> Optional[str]:
    """The worker imposing the most wait (the Distributed view's first straggler row)."""
    rows = straggler_rows(m.workers, m.keyed, m.matched)["rows"]
    return rows[0]["worker"] if rows and rows[0]["imposed_wait_us"] > 0 else None


# --- the model -------------------------------------------------------------------------------

def _chain(m: Matching, w: int) -> Chain:
    summary = m.summaries[m.workers[w]]
    steps = summary.steps
    points: list[tuple[float, int, int, tuple[str, Any], float, float]] = []
    for name, lo, hi in zip(steps.names, steps.starts, steps.ends):
        if hi > lo:
            points.append((lo, _ORDER["start"], MARK, ("start", name), 0.0, lo))
            points.append((hi, _ORDER["end"], MARK, ("end", name), 0.0, hi))
    mine = m.keyed[(m.keyed["w"] == w) & (m.keyed["step"] >= 0)] if len(m.keyed) else None
    calls = [] if mine is None else zip(mine["id"], mine["arrive_at"], mine["end_at"])
    for cid, arrive, end in calls:
        if np.isfinite(arrive) and np.isfinite(end):
            points.append((float(arrive), _ORDER["coll"], COLL, ("coll", int(cid)),
                           float(end) - float(arrive), float(end)))
    points.sort(key=lambda p: (p[0], p[1]))
    chain = Chain(start=(points[0][0] - float(m.offsets[w])) if points else 0.0)
    cursor = points[0][0] if points else 0.0
    previous: tuple[str, Any] = ("first", None)
    for time, _, kind, key, dur, end in points:
        chain.add(PIECE, (previous, key), max(0.0, time - cursor))
        previous = key
        cursor = max(cursor, time)
        chain.add(kind, key, dur)
        if kind == COLL:
            cursor = max(cursor, end)
    return chain


def _collectives(m: Matching, chains: list[Chain]
                 ) -> tuple[dict[int, list[int]], dict[int, float], dict[int, str]]:
    """Per collective id: the ranks whose chains hold it, its transfer time and its step."""
    members: dict[int, list[int]] = {}
    for w, chain in enumerate(chains):
        for kind, key in zip(chain.kinds, chain.keys):
            if kind == COLL:
                members.setdefault(key[1], []).append(w)
    transfer = dict(zip(m.matched["id"].astype(int), m.matched["transfer"].astype(float))) \
        if len(m.matched) else {}
    step_of = dict(zip(m.matched["id"].astype(int), m.matched["step"].astype(str))) \
        if len(m.matched) else {}
    return members, transfer, step_of


def _edited(m: Matching, chains: list[Chain], edits: list[Edit], notes: list[str]
            ) -> tuple[list[list[float]], list[str]]:
    """Each rank's segment durations under the rank edits, and the edits as resolved."""
    durs = [list(c.durs) for c in chains]
    resolved = []
    for edit in edits:
        if edit.target == "transfer":
            resolved.append(str(edit))
            continue
        worker = _worker(m, edit) if edit.target == "rank" else straggler_of(m)
        if worker is None:
            notes.append(f"{edit}: no rank arrives last with a wait, nothing to remove")
            resolved.append(str(edit))
            continue
        resolved.append(f"rank:{worker}={edit.factor:g}")
        w = m.workers.index(worker)
        pairs: dict[Any, list[float]] = {}
        ends: dict[Any, list[float]] = {}
        for v, chain in enumerate(chains):
            if v != w:
                for kind, key, dur in zip(chain.kinds, chain.keys, chain.durs):
                    if kind == PIECE:
                        pairs.setdefault(key, []).append(dur)
                        ends.setdefault(key[1], []).append(dur)
        for i, (kind, key) in enumerate(zip(chains[w].kinds, chains[w].keys)):
            same = pairs.get(key) or ends.get(key[1]) if kind == PIECE else None
            if same:
                median = float(np.median(same))
                durs[w][i] = max(0.0, median + edit.factor * (chains[w].durs[i] - median))
    return durs, resolved


def _worker(m: Matching, edit: Edit) -> str:
    if edit.name in m.workers:
        return edit.name
    by_rank = [w for w in m.workers if str(m.summaries[w].rank) == edit.name]
    if len(by_rank) == 1:
        return by_rank[0]
    raise EditError(f"{edit}: no worker or rank {edit.name!r} in this span (workers: "
                    f"{', '.join(m.workers[:16])}{', ...' if len(m.workers) > 16 else ''})")


def _replay(chains: list[Chain], durs: list[list[float]], members: dict[int, list[int]],
            transfer: dict[int, float], factor: float) -> Replay:
    """Walk every rank's chain; a collective of several ranks waits for its last arrival."""
    n = len(chains)
    ptr, t = [0] * n, [c.start for c in chains]
    marks: list[dict[tuple[str, Any], float]] = [{} for _ in range(n)]
    arrived: dict[int, dict[int, float]] = {}
    waits: list[tuple[int, int, float]] = []
    own_wait = np.zeros(n)
    released: list[int] = []
    solo: set[int] = set()

    def finish(cid: int) -> None:
        got = arrived.pop(cid)
        start = max(got.values())
        last = min(r for r, a in got.items() if a == start)
        end = start + factor * transfer.get(cid, 0.0)
        waits.append((cid, last, sum(start - a for a in got.values())))
        for r, a in got.items():
            own_wait[r] += start - a
            t[r] = end
            ptr[r] += 1

    while True:
        progress = False
        for r in range(n):
            chain = chains[r]
            while ptr[r] < len(chain.kinds):
                kind, key = chain.kinds[ptr[r]], chain.keys[ptr[r]]
                if kind == PIECE:
                    t[r] += durs[r][ptr[r]]
                elif kind == MARK:
                    marks[r][key] = t[r]
                elif len(members[key[1]]) == 1 or key[1] in solo:
                    t[r] += chain.durs[ptr[r]]
                else:
                    got = arrived.setdefault(key[1], {})
                    got[r] = t[r]
                    if len(got) < len(members[key[1]]):
                        break
                    finish(key[1])
                    progress = True
                    continue
                ptr[r] += 1
                progress = True
        if all(ptr[r] >= len(chains[r].kinds) for r in range(n)):
            break
        if not progress:  # a cycle: release the collective most ranks have reached
            cid = max(sorted(arrived), key=lambda c: len(arrived[c]))
            released.append(cid)
            solo.add(cid)
            finish(cid)
    return Replay(marks, waits, own_wait, released)


# --- output ----------------------------------------------------------------------------------

def _shape(m: Matching, edits: list[Edit], resolved: list[str], base: Replay, changed: Replay,
           step_of: dict[int, str], notes: list[str]) -> dict[str, Any]:
    names = _step_names(m)
    rank_rows, per_step = [], {s: {"original": [], "replayed": [], "predicted": []}
                               for s in names}
    for w, worker in enumerate(m.workers):
        steps = m.summaries[worker].steps
        original = {s: hi - lo for s, lo, hi in zip(steps.names, steps.starts, steps.ends)
                    if hi > lo}
        replayed, predicted = _lengths(base.marks[w], original), _lengths(changed.marks[w],
                                                                          original)
        for s in original:
            per_step[s]["original"].append(original[s])
            per_step[s]["replayed"].append(replayed[s])
            per_step[s]["predicted"].append(predicted[s])
        count = max(len(original), 1)
        row = _times(_mean(original.values()), _mean(replayed.values()),
                     _mean(predicted.values()))
        rank_rows.append({
            "worker": worker, "rank": m.summaries[worker].rank, **row,
            "wait_us": float(base.own_wait[w]) / count,
            "predicted_wait_us": float(changed.own_wait[w]) / count,
            "imposed_wait_us": _imposed(base, w) / count,
            "predicted_imposed_wait_us": _imposed(changed, w) / count})
        if not original:
            notes.append(f"{worker}: no step to replay")
    step_rows = [{"step": s, **_times(_mean(v["original"]), _mean(v["replayed"]),
                                      _mean(v["predicted"])),
                  "last": _last(m, base, step_of, s), "new_last": _last(m, changed, step_of, s)}
                 for s, v in per_step.items() if v["original"]]
    span = _times(_mean(r["original_us"] for r in step_rows),
                  _mean(r["replayed_us"] for r in step_rows),
                  _mean(r["predicted_us"] for r in step_rows))
    if len(m.workers) < 2:
        notes.append("one rank: nothing waits for another rank")
    return {"edits": [str(e) for e in edits], "resolved": resolved, **span,
            "last": _last(m, base, step_of, None), "new_last": _last(m, changed, step_of, None),
            "ranks": rank_rows, "steps": step_rows, "notes": notes}


def _lengths(marks: dict[tuple[str, Any], float], original: dict[str, float]
             ) -> dict[str, float]:
    return {s: marks.get(("end", s), 0.0) - marks.get(("start", s), 0.0) for s in original}


def _times(original: float, replayed: float, predicted: float) -> dict[str, float]:
    saving = replayed - predicted  # what the edits change in the model
    return {"original_us": original, "replayed_us": replayed, "predicted_us": predicted,
            "saving_us": saving, "saving_pct": 100.0 * saving / replayed if replayed > 0 else 0.0}


def _mean(values: Any) -> float:
    values = list(values)
    return float(np.mean(values)) if values else 0.0


def _imposed(replay: Replay, w: int) -> float:
    return float(sum(wait for _, last, wait in replay.waits if last == w))


def _last(m: Matching, replay: Replay, step_of: dict[int, str], step: Optional[str]
          ) -> Optional[str]:
    imposed = np.zeros(len(m.workers))
    for cid, last, wait in replay.waits:
        if step is None or step_of.get(cid) == step:
            imposed[last] += wait
    if not len(imposed) or imposed.max() <= 0:
        return None
    return m.workers[int(np.argmax(imposed))]  # ties: the first worker by name


def _step_names(m: Matching) -> list[str]:
    names = {n for s in m.summaries.values() for n in s.steps.names}
    return sorted(names, key=lambda n: (0, int(n), n) if n.isdigit() else (1, 0, n))
