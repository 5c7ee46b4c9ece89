// The critical path of one step over the Trace view (GPU Idle's "Show on Trace"): path events
// outlined (their fills kept; everything else dimmed by the painter), blocks holding path events
// filled in the highlight color, and the path's edges drawn in order as arrows. What is on the
// path comes marked in the frame (`critical_step` of /timeline: RowData.evPath / blPath).

import type { Frame, RowData } from './frame'
import { ROW_H, type Layout } from './layout'
import { arrow, rowCenter } from './paint-links'
import type { PaintKit } from './paint-kit'
import type { Scene } from './painter'
import { xAt } from './viewport'

export const CRITICAL_COLOR = '#e53935'

/** Outlines the path events and marked blocks of `frame` on screen; returns how many. */
export function drawCriticalOutlines(kit: PaintKit, s: Scene, frame: Frame): number {
  const { ctx } = kit
  const v = s.viewport
  let drawn = 0
  ctx.strokeStyle = CRITICAL_COLOR
  ctx.lineWidth = 1.5
  forEachTrackRow(s.layout, frame, (row, track, depth) => {
    const pos = s.layout.trackY.get(track)
    if (!pos || pos.collapsed) return
    const y = s.top + pos.y + depth * ROW_H
    if (y + ROW_H < 0 || y > s.h) return
    drawn += outlineMarked(ctx, v, s.w, row.evStart, row.evEnd, row.evPath, y)
    drawn += outlineMarked(ctx, v, s.w, row.blStart, row.blEnd, row.blPath, y)
  })
  return drawn
}

function outlineMarked(ctx: CanvasRenderingContext2D, v: Scene['viewport'], w: number, start: Float64Array, end: Float64Array, mark: Uint8Array, y: number): number {
  let drawn = 0
  for (let i = 0; i < mark.length; i++) {
    if (!mark[i]) continue
    const x0 = xAt(v, start[i])
    const x1 = Math.max(xAt(v, end[i]), x0 + 2)
    if (x1 < v.left || x0 > w) continue
    ctx.strokeRect(x0 - 0.5, y - 0.5, x1 - x0 + 1, ROW_H)
    drawn++
  }
  return drawn
}

function forEachTrackRow(layout: Layout, frame: Frame, fn: (row: RowData, track: number, depth: number) => void): void {
  for (const [track] of layout.trackY) {
    const rows = frame.rows[track]
    if (!rows) continue
    for (let d = 0; d < rows.length; d++) {
      const row = rows[d]
      if (row) fn(row, track, d)
    }
  }
}

/** The path's edges in order (predecessor end -> where it bound the node); returns how many. */
export function drawCriticalEdges(kit: PaintKit, s: Scene, frame: Frame): number {
  const c = frame.critical
  if (!c) return 0
  const v = s.viewport
  const shown: number[] = []
  for (let i = 0; i < c.count; i++) {
    if (c.fromTrack[i] < 0 || c.toTrack[i] < 0) continue
    const y0 = rowCenter(s, c.fromTrack[i], c.fromDepth[i])
    const y1 = rowCenter(s, c.toTrack[i], c.toDepth[i])
    if (y0 === null || y1 === null) continue
    const x0 = xAt(v, c.fromT[i])
    const x1 = xAt(v, c.toT[i])
    if (Math.max(x0, x1) < v.left || Math.min(x0, x1) > s.w) continue
    shown.push(x0, y0, x1, y1)
  }
  for (const halo of [true, false]) {
    for (let k = 0; k < shown.length; k += 4) arrow(kit, shown[k], shown[k + 1], shown[k + 2], shown[k + 3], CRITICAL_COLOR, 1.25, halo)
  }
  return shown.length / 4
}
