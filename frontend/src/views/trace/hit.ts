// What is under a point of the Trace view's canvas: an event, a merged block, a process header,
// or a counter value. Reads the same snapshot the painter draws, so what is hit is what is seen.

import type { TrackInfo } from './api'
import { firstAtOrAfter, lastAtOrBefore, type Frame, type RowData } from './frame'
import { HEADER_H, ROW_H, TRACK_PAD, itemAt, type GroupItem, type Layout } from './layout'
import { timeAt, usPerPx, type Viewport } from './viewport'

/** Where an event is drawn: enough to outline it and to bring it into view. */
export interface EventRef {
  id: number
  name: string
  start: number // trace time (us)
  end: number
  track: number
  depth: number
}

/** The frames on screen: `cur` (the last window loaded) inside its window, `base` outside. */
export interface Frames {
  readonly base: Frame | null
  readonly cur: Frame | null
}

export type Hit =
  | { type: 'event'; row: RowData; index: number; frame: Frame; track: TrackInfo; depth: number }
  | { type: 'block'; row: RowData; index: number; frame: Frame; track: TrackInfo; depth: number }
  | { type: 'group'; item: GroupItem }
  | { type: 'counter'; name: string; unit: string; t: number }
  | null

/** The frame that holds data at trace time t: the current one inside its window. */
function frameAt(frames: Frames, t: number): Frame | null {
  const cur = frames.cur
  if (cur && t >= cur.start && t <= cur.end) return cur
  return frames.base
}

/**
 * The thing at canvas (x, y); `top` is the canvas y of the layout's y = 0 (it moves with the
 * vertical scroll). Events win over blocks, within 2 px either side (aiming at a 1 px event).
 */
export function hitTest(frames: Frames, layout: Layout, v: Viewport, top: number, x: number, y: number): Hit {
  if (y < HEADER_H) return null
  const cy = y - top
  const item = itemAt(layout, cy)
  if (!item) return null
  if (item.type === 'group') return { type: 'group', item }
  if (x < v.left) return null
  const t = timeAt(v, x)
  if (item.type === 'counter') return { type: 'counter', name: item.name, unit: item.unit, t }
  const depth = Math.floor((cy - item.y - TRACK_PAD) / ROW_H)
  if (depth < 0 || depth >= item.track.depth) return null
  const frame = frameAt(frames, t)
  if (!frame) return null
  const row = frame.rows[item.track.id]?.[depth]
  if (!row) return null
  const tol = 2 * usPerPx(v)
  let best = -1
  let bestDist = Infinity
  const i0 = Math.max(0, firstAtOrAfter(row.evEnd, t - tol))
  for (let i = i0; i < row.evStart.length && row.evStart[i] <= t + tol; i++) {
    const d = t < row.evStart[i] ? row.evStart[i] - t : t > row.evEnd[i] ? t - row.evEnd[i] : 0
    if (d < bestDist) {
      bestDist = d
      best = i
    }
  }
  if (best >= 0) return { type: 'event', row, index: best, frame, track: item.track, depth }
  const b = lastAtOrBefore(row.blStart, t + tol)
  if (b >= 0 && row.blEnd[b] >= t - tol) return { type: 'block', row, index: b, frame, track: item.track, depth }
  return null
}

export function refOf(hit: Extract<Hit, { type: 'event' }>): EventRef {
  const { row, index, frame, track, depth } = hit
  return { id: row.evId[index], name: frame.names[row.evName[index]] ?? '', start: row.evStart[index], end: row.evEnd[index], track: track.id, depth }
}

/** The counter's value at trace time t (a step function), or null before its first sample. */
export function counterAt(frames: Frames, name: string, t: number): number | null {
  const frame = frameAt(frames, t)
  const c = frame?.counters.find((s) => s.name === name)
  if (!c || c.t.length === 0) return null
  const i = lastAtOrBefore(c.t, t)
  return i >= 0 ? c.v[i] : null
}
