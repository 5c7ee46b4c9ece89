// The Trace view's track list as the user arranged it: pinned tracks (shown first, in their own
// group), hidden tracks, the order of the process groups and the collapsed groups. Kept in the
// URL (the trace view's slice: state.ts), so a reload or a shared link shows the same tracks.
// Pure functions over plain data; layout.ts applies the arrangement.

import type { TrackListUrl } from './state'

export interface TrackList {
  /** Track ids pinned to the top, in pin order. */
  pinned: readonly number[]
  /** Track ids the user hid. */
  hidden: readonly number[]
  /** Group keys in the user's order; groups not named keep the server's order after them. */
  order: readonly string[]
  /** Collapsed group keys. */
  collapsed: readonly string[]
}

export const NO_ARRANGEMENT: TrackList = { pinned: [], hidden: [], order: [], collapsed: [] }

/** The group (process) key of a track: unambiguous, since a kind never holds ':'. */
export function groupKey(kind: string, process: string): string {
  return `${kind}:${process}`
}

function ids(textValue: string): number[] {
  const out: number[] = []
  for (const part of textValue.split(',')) {
    if (!/^\d+$/.test(part)) continue
    const id = Number(part)
    if (!out.includes(id)) out.push(id)
  }
  return out
}

function keys(textValue: string): string[] {
  const out: string[] = []
  for (const part of textValue.split(',')) {
    if (!part) continue
    let key: string
    try {
      key = decodeURIComponent(part)
    } catch {
      continue // a mangled link: drop the item, keep the rest
    }
    if (!out.includes(key)) out.push(key)
  }
  return out
}

/** The arrangement a URL holds (unknown or malformed items are dropped). */
export function parseTrackList(s: TrackListUrl): TrackList {
  return { pinned: ids(s.trPin), hidden: ids(s.trHide), order: keys(s.trOrder), collapsed: keys(s.trFold) }
}

/** The URL fields of an arrangement ('' for an empty list, so defaults stay out of the URL). */
export function formatTrackList(list: TrackList): TrackListUrl {
  const enc = (xs: readonly string[]) => xs.map(encodeURIComponent).join(',')
  return { trPin: list.pinned.join(','), trHide: list.hidden.join(','), trOrder: enc(list.order), trFold: enc(list.collapsed) }
}

function toggle<T>(xs: readonly T[], x: T): T[] {
  return xs.includes(x) ? xs.filter((y) => y !== x) : [...xs, x]
}

/** Pins a track (it leaves its group for the pinned group at the top), or unpins it. */
export function togglePin(list: TrackList, id: number): TrackList {
  return { ...list, pinned: toggle(list.pinned, id), hidden: list.hidden.filter((x) => x !== id) }
}

/** Hides a track (a hidden track is not pinned), or shows it again. */
export function toggleHidden(list: TrackList, id: number): TrackList {
  return { ...list, hidden: toggle(list.hidden, id), pinned: list.pinned.filter((x) => x !== id) }
}

export function toggleCollapsed(list: TrackList, key: string): TrackList {
  return { ...list, collapsed: toggle(list.collapsed, key) }
}

export function expand(list: TrackList, key: string): TrackList {
  return list.collapsed.includes(key) ? { ...list, collapsed: list.collapsed.filter((k) => k !== key) } : list
}

/** Every hidden track shown again. */
export function showAll(list: TrackList): TrackList {
  return { ...list, hidden: [] }
}

/**
 * The groups `present` (server order) in the user's order: named groups first in their order,
 * then the others in server order. Keys of groups this trace lacks are ignored.
 */
export function orderGroups(present: readonly string[], order: readonly string[]): string[] {
  const have = new Set(present)
  const first = order.filter((k) => have.has(k))
  const named = new Set(first)
  return [...first, ...present.filter((k) => !named.has(k))]
}

/**
 * Moves group `key` by `delta` places (-1 up, +1 down) among `present` (server order), as the
 * user sees them; the result names every present group, so the order is fully kept.
 */
export function moveGroup(list: TrackList, present: readonly string[], key: string, delta: number): TrackList {
  const order = orderGroups(present, list.order)
  const at = order.indexOf(key)
  const to = at + delta
  if (at < 0 || to < 0 || to >= order.length) return list
  order.splice(at, 1)
  order.splice(to, 0, key)
  return { ...list, order }
}

/**
 * A track not worth a row: no events, or no pid and no tid (the lane of global-scope instants
 * such as `Record Window End`, which the server labels "(no pid)": a single zero-length marker
 * in an otherwise empty row). Never laid out; the track menu says how many were left out.
 */
export function isEmptyTrack(t: { event_count: number; pid: string; tid: string }): boolean {
  return !(t.event_count > 0) || (t.pid === '' && t.tid === '')
}
