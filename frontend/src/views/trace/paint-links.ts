// What the Trace view draws over the events: flow arrows, links from the selection to its
// correlated partners, and the outlines of the selected and the hovered event.

import type { Frame } from './frame'
import type { EventRef } from './hit'
import { GROUP_H, HEADER_H, ROW_H } from './layout'
import type { PaintKit } from './paint-kit'
import type { Scene } from './painter'
import { xAt } from './viewport'

const FLOW_COLORS: Record<string, string> = { ac2g: '#1e88e5', fwdbwd: '#8e24aa', async: '#00897b' }

/** Canvas y of the middle of row (track, depth), or of its group's header when collapsed. */
function rowCenter(s: Scene, track: number, depth: number): number | null {
  const pos = s.layout.trackY.get(track)
  if (!pos) return null
  if (pos.collapsed) return s.top + pos.y + GROUP_H / 2
  return s.top + pos.y + depth * ROW_H + (ROW_H - 1) / 2
}

function arrow(kit: PaintKit, x0: number, y0: number, x1: number, y1: number, color: string, width: number, halo: boolean): void {
  const { ctx } = kit
  const dx = Math.max(12, Math.abs(x1 - x0) * 0.4)
  ctx.beginPath()
  ctx.moveTo(x0, y0)
  if (Math.abs(y1 - y0) < 1) ctx.lineTo(x1, y1)
  else ctx.bezierCurveTo(x0 + dx, y0, x1 - dx, y1, x1, y1)
  if (halo) {
    // A halo in the background color keeps the line readable over colored slices.
    ctx.strokeStyle = kit.colors.bg
    ctx.lineWidth = width + 2
    ctx.stroke()
    return
  }
  ctx.strokeStyle = color
  ctx.fillStyle = color
  ctx.lineWidth = width
  ctx.stroke()
  // Arrow head along the curve's end (horizontal for a curve, the line's angle otherwise).
  const angle = Math.abs(y1 - y0) < 1 ? Math.atan2(y1 - y0, x1 - x0) : 0
  const size = 3 + width * 1.5
  ctx.beginPath()
  ctx.moveTo(x1, y1)
  ctx.lineTo(x1 - size * Math.cos(angle - 0.45), y1 - size * Math.sin(angle - 0.45))
  ctx.lineTo(x1 - size * Math.cos(angle + 0.45), y1 - size * Math.sin(angle + 0.45))
  ctx.closePath()
  ctx.fill()
  ctx.beginPath()
  ctx.arc(x0, y0, width + 0.8, 0, Math.PI * 2)
  ctx.fill()
}

/**
 * All flows (on request): only arrows whose two ends are both on screen, so arrows from
 * off-screen sources never cross the rows as flat bands and a full zoom-out is not a wall.
 */
export function drawFlows(kit: PaintKit, s: Scene, frame: Frame): void {
  const f = frame.flows
  const v = s.viewport
  const shown: number[] = []
  for (let i = 0; i < f.count; i++) {
    const cat = f.cats[f.cat[i]] ?? ''
    if (s.flows.catsOff.has(cat)) continue
    const y0 = rowCenter(s, f.fromTrack[i], f.fromDepth[i])
    const y1 = rowCenter(s, f.toTrack[i], f.toDepth[i])
    if (y0 === null || y1 === null) continue
    if (Math.min(y0, y1) < HEADER_H || Math.max(y0, y1) > s.h) continue
    const x0 = xAt(v, f.fromT[i])
    const x1 = xAt(v, f.toT[i])
    if (Math.min(x0, x1) < v.left || Math.max(x0, x1) > s.w) continue
    shown.push(i, x0, y0, x1, y1)
  }
  drawArrows(kit, f, shown, 1)
}

/**
 * The flows of the selected event and their chain (by default, without the Flows toggle): every
 * flow with an end on the selection (by event id), then the flows of the events at their other
 * ends, a few hops deep. Ends may be off screen: the arrow is clipped.
 */
export function drawSelectedFlows(kit: PaintKit, s: Scene, frame: Frame): number {
  const sel = s.selected
  const f = frame.flows
  if (!sel || f.count === 0) return 0
  const picked = new Set<number>()
  let events = new Set<number>([sel.id])
  const seen = new Set<number>(events)
  for (let hop = 0; hop < 5 && events.size; hop++) {
    const next = new Set<number>()
    for (let i = 0; i < f.count; i++) {
      if (picked.has(i) || !(events.has(f.fromId[i]) || events.has(f.toId[i]))) continue
      picked.add(i)
      for (const id of [f.fromId[i], f.toId[i]]) {
        if (id >= 0 && !seen.has(id)) {
          seen.add(id)
          next.add(id)
        }
      }
    }
    events = next
  }
  const v = s.viewport
  const shown: number[] = []
  for (const i of picked) {
    const y0 = rowCenter(s, f.fromTrack[i], f.fromDepth[i])
    const y1 = rowCenter(s, f.toTrack[i], f.toDepth[i])
    if (y0 === null || y1 === null) continue
    shown.push(i, xAt(v, f.fromT[i]), y0, xAt(v, f.toT[i]), y1)
  }
  drawArrows(kit, f, shown, 1.5)
  return picked.size
}

function drawArrows(kit: PaintKit, f: Frame['flows'], shown: number[], width: number): void {
  const { ctx } = kit
  for (const halo of [true, false]) {
    ctx.globalAlpha = halo ? 0.6 : 0.9
    for (let k = 0; k < shown.length; k += 5) {
      const cat = f.cats[f.cat[shown[k]]] ?? ''
      arrow(kit, shown[k + 1], shown[k + 2], shown[k + 3], shown[k + 4], FLOW_COLORS[cat] ?? '#757575', width, halo)
    }
  }
  ctx.globalAlpha = 1
}

export function drawRelated(kit: PaintKit, s: Scene): void {
  const sel = s.selected
  if (!sel || s.related.length === 0) return
  const ys = rowCenter(s, sel.track, sel.depth)
  if (ys === null) return
  const v = s.viewport
  for (const r of s.related) {
    const yr = rowCenter(s, r.track, r.depth)
    if (yr === null) continue
    const [a, b] = sel.start <= r.start ? [sel, r] : [r, sel]
    const ya = a === sel ? ys : yr
    const yb = a === sel ? yr : ys
    for (const halo of [true, false]) arrow(kit, xAt(v, a.start), ya, xAt(v, b.start), yb, kit.colors.accent, 1.5, halo)
    outline(kit, s, r, kit.colors.accent, 1.5)
  }
}

function outline(kit: PaintKit, s: Scene, ref: EventRef, color: string, width: number): void {
  const pos = s.layout.trackY.get(ref.track)
  if (!pos || pos.collapsed) return
  const v = s.viewport
  const y = s.top + pos.y + ref.depth * ROW_H
  let x0 = xAt(v, ref.start)
  let x1 = xAt(v, ref.end)
  if (x1 - x0 < 3) {
    // Too thin to see an outline: a 3 px box around its middle.
    const mid = (x0 + x1) / 2
    x0 = mid - 1.5
    x1 = mid + 1.5
  }
  x0 = Math.max(x0, v.left - 4)
  x1 = Math.min(x1, s.w + 4)
  if (x1 < v.left || x0 > s.w) return
  const { ctx } = kit
  ctx.strokeStyle = color
  ctx.lineWidth = width
  ctx.strokeRect(x0 + width / 2, y + width / 2 - 0.5, x1 - x0 - width, ROW_H - width)
}

export function drawSelection(kit: PaintKit, s: Scene): void {
  if (s.selected) outline(kit, s, s.selected, kit.colors.selection, 2)
}

export function drawHoverOutline(kit: PaintKit, s: Scene): void {
  const ref = s.hover
  if (!ref || (s.selected && s.selected.id === ref.id)) return
  outline(kit, s, ref, kit.colors.muted, 1)
}

/** The selected range: the time span shaded over every row, the chosen tracks' rows stronger. */
export function drawRange(kit: PaintKit, s: Scene): void {
  const r = s.range
  if (!r) return
  const v = s.viewport
  const x0 = Math.max(v.left, xAt(v, r.start))
  const x1 = Math.min(s.w, xAt(v, r.end))
  if (x1 <= x0) return
  const { ctx } = kit
  ctx.fillStyle = kit.colors.accent
  ctx.globalAlpha = 0.08
  ctx.fillRect(x0, HEADER_H, x1 - x0, s.h - HEADER_H)
  ctx.globalAlpha = 0.16
  const y0 = Math.max(HEADER_H, r.y0)
  ctx.fillRect(x0, y0, x1 - x0, Math.max(0, Math.min(s.h, r.y1) - y0))
  ctx.globalAlpha = 1
  ctx.strokeStyle = kit.colors.accent
  ctx.lineWidth = 1
  ctx.beginPath()
  ctx.moveTo(x0 + 0.5, HEADER_H)
  ctx.lineTo(x0 + 0.5, s.h)
  ctx.moveTo(x1 - 0.5, HEADER_H)
  ctx.lineTo(x1 - 0.5, s.h)
  ctx.stroke()
}
