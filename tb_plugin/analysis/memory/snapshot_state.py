"""What an allocator snapshot held at any moment of its trace: allocation and segment lifetimes,
segments with their blocks at an instant, and the largest live allocations.

A snapshot records its allocator's state at dump time (`segments` with `blocks`) and the
actions before it (`device_traces`, possibly cut at the front by `max_entries`). Lifetimes are
intervals of entry positions: an allocation lives from its `alloc` entry to the matching
`free_completed` (same address, next one in order; memory counts as allocated until then, as
the allocator's own statistics do), a segment from `segment_alloc`/`segment_map` to
`segment_free`/`segment_unmap`. What was already there when the trace starts is recovered from
the dump: a free without an allocation started before the trace (start -1), and an allocated
block (or a segment) of the dump that no open trace entry accounts for lived through the whole
trace. The state "at position p" is after entry p (p = -1: before the first entry).
All of it is column operations over the snapshot's arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...ingest.snapshot import (
    ALLOC,
    FREE_COMPLETED,
    SEGMENT_ALLOC,
    SEGMENT_FREE,
    SEGMENT_MAP,
    SEGMENT_UNMAP,
    Snapshot,
)

#: Segments and blocks returned for one instant, at most (the largest blocks are kept).
MAX_SEGMENTS = 400
MAX_BLOCKS = 4000
TOP_ALLOCATIONS = 20


@dataclass
class Lifetimes:
    """Intervals [start, end) of entry positions (start -1: before the trace; end n: still
    there at the dump), with address, size and stack (-1: none)."""

    addr: np.ndarray
    size: np.ndarray
    start: np.ndarray
    end: np.ndarray
    stack: np.ndarray

    def live_at(self, position: int) -> np.ndarray:
        return np.flatnonzero((self.start <= position) & (position < self.end))


def device_rows(snap: Snapshot, device: int) -> dict[str, np.ndarray]:
    """The trace entries of one device, in file (time) order."""
    mine = snap.entries["device"] == device
    return {name: column[mine] for name, column in snap.entries.items()}


def _pair(action: np.ndarray, addr: np.ndarray, size: np.ndarray, stack: np.ndarray,
          opens: tuple[int, ...], closes: tuple[int, ...]) -> Lifetimes:
    """Open entries matched with the next close entry of the same address."""
    n = len(action)
    rows = np.flatnonzero(np.isin(action, opens + closes))
    rows = rows[np.lexsort((rows, addr[rows]))]  # by address, then position
    is_open = np.isin(action[rows], opens)
    same_next = addr[rows[1:]] == addr[rows[:-1]]
    paired = same_next & is_open[:-1] & ~is_open[1:]
    claimed = np.zeros(len(rows), dtype=bool)
    claimed[1:] = paired
    end_of_open = np.full(len(rows), n, dtype=np.int64)
    end_of_open[:-1][paired] = rows[1:][paired]
    opened = rows[is_open]
    orphans = rows[~is_open & ~claimed]  # closed, opened before the trace
    return Lifetimes(
        addr=np.concatenate((addr[opened], addr[orphans])),
        size=np.concatenate((size[opened], size[orphans])),
        start=np.concatenate((opened, np.full(len(orphans), -1, dtype=np.int64))),
        end=np.concatenate((end_of_open[is_open], orphans)),
        stack=np.concatenate((stack[opened], stack[orphans])),
    )


def _with_dump(life: Lifetimes, addr: np.ndarray, size: np.ndarray, stack: np.ndarray,
               n: int) -> Lifetimes:
    """Add what the dump holds and no open interval accounts for: there all along."""
    still_open = life.addr[life.end == n]
    extra = ~np.isin(addr, still_open)
    return Lifetimes(
        addr=np.concatenate((life.addr, addr[extra])),
        size=np.concatenate((life.size, size[extra])),
        start=np.concatenate((life.start, np.full(int(extra.sum()), -1, dtype=np.int64))),
        end=np.concatenate((life.end, np.full(int(extra.sum()), n, dtype=np.int64))),
        stack=np.concatenate((life.stack, stack[extra])),
    )


def dump_blocks(snap: Snapshot, device: int) -> dict[str, np.ndarray]:
    """The allocated blocks (active or awaiting free) of the device's segments at dump time."""
    segment_device = snap.segments["device"]
    on_device = segment_device[snap.blocks["segment"]] == device if len(segment_device) \
        else np.zeros(0, dtype=bool)
    keep = on_device & (snap.blocks["state"] > 0)
    return {name: column[keep] for name, column in snap.blocks.items()}


def dump_segments(snap: Snapshot, device: int) -> dict[str, np.ndarray]:
    keep = snap.segments["device"] == device
    return {name: column[keep] for name, column in snap.segments.items()}


def allocation_lifetimes(snap: Snapshot, device: int) -> Lifetimes:
    rows = device_rows(snap, device)
    life = _pair(rows["action"], rows["addr"], rows["size"], rows["stack"],
                 (ALLOC,), (FREE_COMPLETED,))
    blocks = dump_blocks(snap, device)
    return _with_dump(life, blocks["address"], blocks["size"], blocks["stack"],
                      len(rows["action"]))


def segment_lifetimes(snap: Snapshot, device: int) -> Lifetimes:
    rows = device_rows(snap, device)
    life = _pair(rows["action"], rows["addr"], rows["size"], rows["stack"],
                 (SEGMENT_ALLOC, SEGMENT_MAP), (SEGMENT_FREE, SEGMENT_UNMAP))
    segments = dump_segments(snap, device)
    none = np.full(len(segments["address"]), -1, dtype=np.int64)
    return _with_dump(life, segments["address"], segments["total_size"], none,
                      len(rows["action"]))


def segments_at(allocs: Lifetimes, segments: Lifetimes, position: int,
                frame_label: Any) -> dict[str, Any]:
    """Segments live after entry `position`, each with its live blocks (offset, size, first
    frame) and free bytes; totals and the largest free gap (the biggest request served without a
    new segment). `frame_label(stack)` labels a stack."""
    seg = segments.live_at(position)
    seg = seg[np.argsort(segments.addr[seg], kind="stable")]
    seg_start, seg_size = segments.addr[seg], segments.size[seg]
    blocks = allocs.live_at(position)
    owner = np.searchsorted(seg_start, allocs.addr[blocks], side="right") - 1
    inside = (owner >= 0)
    inside[inside] &= allocs.addr[blocks][inside] < (seg_start + seg_size)[owner[inside]]
    blocks, owner = blocks[inside], owner[inside]
    order = np.lexsort((allocs.addr[blocks], owner))
    blocks, owner = blocks[order], owner[order]
    used = np.bincount(owner, weights=allocs.size[blocks], minlength=len(seg)).astype(np.int64)
    largest_gap = _largest_gaps(seg_start, seg_size, owner, allocs.addr[blocks],
                                allocs.size[blocks])
    shown = np.argsort(-seg_size, kind="stable")[:MAX_SEGMENTS]
    shown_set = np.zeros(len(seg), dtype=bool)
    shown_set[shown] = True
    block_keep = shown_set[owner]
    if block_keep.sum() > MAX_BLOCKS:
        biggest = np.argsort(-np.where(block_keep, allocs.size[blocks], -1), kind="stable")
        block_keep = np.zeros(len(blocks), dtype=bool)
        block_keep[biggest[:MAX_BLOCKS]] = True
    rows = []
    by_segment: dict[int, list[dict[str, Any]]] = {int(i): [] for i in np.flatnonzero(shown_set)}
    for b, o in zip(blocks[block_keep].tolist(), owner[block_keep].tolist()):
        by_segment[o].append({"offset": int(allocs.addr[b] - seg_start[o]),
                              "size": int(allocs.size[b]),
                              "frame": frame_label(int(allocs.stack[b]))})
    for i in sorted(by_segment, key=lambda k: int(seg_start[k])):
        rows.append({"address": int(seg_start[i]), "size": int(seg_size[i]),
                     "allocated_bytes": int(used[i]), "largest_free_bytes": int(largest_gap[i]),
                     "blocks": by_segment[i]})
    reserved = int(seg_size.sum())
    allocated = int(used.sum())
    return {
        "position": int(position),
        "reserved_bytes": reserved,
        "allocated_bytes": allocated,
        "free_bytes": reserved - allocated,
        "largest_free_bytes": int(largest_gap.max()) if len(largest_gap) else 0,
        "segment_count": int(len(seg)),
        "block_count": int(len(blocks)),
        "truncated": bool(len(rows) < len(seg) or block_keep.sum() < len(blocks)),
        "rows": rows,
    }


def _largest_gaps(seg_start: np.ndarray, seg_size: np.ndarray, owner: np.ndarray,
                  block_start: np.ndarray, block_size: np.ndarray) -> np.ndarray:
    """Per segment, the largest run of bytes no live block covers (blocks sorted by owner and
    address). The gaps are before each block, and after the last block of each segment."""
    n = len(seg_start)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    ends = block_start + block_size
    prev_end = np.empty(len(owner), dtype=np.int64)
    if len(owner):
        prev_end[0] = seg_start[owner[0]]
        first = np.ones(len(owner), dtype=bool)
        first[1:] = owner[1:] != owner[:-1]
        prev_end[1:] = ends[:-1]
        prev_end[first] = seg_start[owner[first]]
    before = np.maximum(block_start - prev_end, 0)
    best = np.zeros(n, dtype=np.int64)
    np.maximum.at(best, owner, before)
    last_end = seg_start.copy()
    np.maximum.at(last_end, owner, ends)
    return np.maximum(best, seg_start + seg_size - last_end)


def top_live(allocs: Lifetimes, position: int, top: int = TOP_ALLOCATIONS) -> np.ndarray:
    """The `top` largest allocations live after entry `position`, largest first."""
    live = allocs.live_at(position)
    return live[np.argsort(-allocs.size[live], kind="stable")[:top]]
