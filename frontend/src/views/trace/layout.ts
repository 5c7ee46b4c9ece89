// Vertical layout of the Trace view: groups (one per process, plus "Counters") with a header,
// tracks (threads / GPU streams) inside, one row per nesting depth. Computed from the track list,
// which every `timeline` payload carries in full, so the layout never jumps while zooming.

import type { TrackInfo } from './api'

export const ROW_H = 18
export const TRACK_PAD = 3
export const GROUP_H = 24
const COUNTER_H = 36
export const HEADER_H = 42 // time ruler (24) + step band (18), fixed above the scrolled content
export const RULER_H = 24
export const GUTTER_W = 232

export interface GroupItem {
  type: 'group'
  key: string
  label: string
  detail: string
  kind: string
  collapsed: boolean
  y: number
  h: number
  trackIds: number[]
}

export interface TrackItem {
  type: 'track'
  track: TrackInfo
  group: string
  y: number
  h: number
}

export interface CounterItem {
  type: 'counter'
  name: string
  unit: string
  kind: string
  group: string
  y: number
  h: number
}

export type LayoutItem = GroupItem | TrackItem | CounterItem

export interface Layout {
  items: LayoutItem[]
  height: number
  /** Top of the row of (track, depth), or the header of its group when collapsed. */
  trackY: Map<number, { y: number; collapsed: boolean; group: string }>
  groupOf: Map<number, string>
}

export const COUNTERS_GROUP = '\u0000counters'

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`
}

export function computeLayout(tracks: TrackInfo[], counters: { name: string; unit: string; kind: string }[], collapsed: ReadonlySet<string>): Layout {
  const items: LayoutItem[] = []
  const trackY = new Map<number, { y: number; collapsed: boolean; group: string }>()
  const groupOf = new Map<number, string>()
  let y = 0

  if (counters.length) {
    const isCollapsed = collapsed.has(COUNTERS_GROUP)
    items.push({ type: 'group', key: COUNTERS_GROUP, label: 'Counters', detail: plural(counters.length, 'series', 'series'), kind: 'counters', collapsed: isCollapsed, y, h: GROUP_H, trackIds: [] })
    y += GROUP_H
    if (!isCollapsed) {
      for (const c of counters) {
        items.push({ type: 'counter', name: c.name, unit: c.unit, kind: c.kind, group: COUNTERS_GROUP, y, h: COUNTER_H })
        y += COUNTER_H
      }
    }
  }

  // Processes in the order of their first track (the server's display order).
  const groups: { key: string; label: string; kind: string; tracks: TrackInfo[] }[] = []
  const byKey = new Map<string, (typeof groups)[number]>()
  for (const t of tracks) {
    if (!t) continue
    const key = `${t.kind}\u0000${t.process}`
    let g = byKey.get(key)
    if (!g) {
      g = { key, label: t.process || '(no process)', kind: t.kind, tracks: [] }
      byKey.set(key, g)
      groups.push(g)
    }
    g.tracks.push(t)
  }

  for (const g of groups) {
    const isCollapsed = collapsed.has(g.key)
    const events = g.tracks.reduce((acc, t) => acc + (t.event_count || 0), 0)
    const lanes = g.kind === 'gpu' ? plural(g.tracks.length, 'stream') : g.kind === 'cpu' ? plural(g.tracks.length, 'thread') : plural(g.tracks.length, 'track')
    const header: GroupItem = { type: 'group', key: g.key, label: g.label, detail: `${lanes} · ${plural(events, 'event')}`, kind: g.kind, collapsed: isCollapsed, y, h: GROUP_H, trackIds: g.tracks.map((t) => t.id) }
    items.push(header)
    for (const t of g.tracks) groupOf.set(t.id, g.key)
    y += GROUP_H
    if (isCollapsed) {
      for (const t of g.tracks) trackY.set(t.id, { y: header.y, collapsed: true, group: g.key })
      continue
    }
    for (const t of g.tracks) {
      const h = Math.max(1, t.depth) * ROW_H + 2 * TRACK_PAD
      items.push({ type: 'track', track: t, group: g.key, y, h })
      trackY.set(t.id, { y: y + TRACK_PAD, collapsed: false, group: g.key })
      y += h
    }
  }
  return { items, height: y, trackY, groupOf }
}

/** The item at content y (binary search; items are sorted and contiguous). */
export function itemAt(layout: Layout, y: number): LayoutItem | null {
  const items = layout.items
  let lo = 0
  let hi = items.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    const it = items[mid]
    if (y < it.y) hi = mid - 1
    else if (y >= it.y + it.h) lo = mid + 1
    else return it
  }
  return null
}

/**
 * The scrollTop (content px) that brings row (track, depth) into a `visibleH` px tall view now
 * scrolled to `scrollTop`: the row a third of the way down, or null when it is already in view
 * (4 px from either edge) or not laid out.
 */
export function rowScrollTop(layout: Layout, track: number, depth: number, scrollTop: number, visibleH: number): number | null {
  const pos = layout.trackY.get(track)
  if (!pos) return null
  const rowTop = pos.y + depth * ROW_H
  if (rowTop >= scrollTop + 4 && rowTop + ROW_H <= scrollTop + visibleH - 4) return null
  return Math.max(0, rowTop - visibleH / 3)
}

/** First item whose bottom is below content y. */
export function firstVisible(layout: Layout, y: number): number {
  const items = layout.items
  let lo = 0
  let hi = items.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (items[mid].y + items[mid].h <= y) lo = mid + 1
    else hi = mid
  }
  return lo
}
