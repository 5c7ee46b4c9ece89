// The Trace view's chrome, drawn over the content: the track names (gutter), the time ruler and
// step band (header), and the crosshair that follows the pointer.

import { firstAtOrAfter } from './frame'
import { GUTTER_W, HEADER_H, ROW_H, RULER_H, TRACK_PAD, type LayoutItem } from './layout'
import { FONT, FONT_BOLD, FONT_SMALL, type PaintKit } from './paint-kit'
import type { Scene } from './painter'
import { fmtCounter, fmtDuration, fmtTick, fmtTime, niceStep } from './timefmt'
import { timeAt, usPerPx, xAt, type Viewport } from './viewport'

/** Ruler ticks about every 100 px, on a 1-2-5 step. */
export function tickStep(v: Viewport): number {
  return niceStep(usPerPx(v) * 100)
}

/** Steps visible in the view: the current frame's inside its window, the base's outside. */
export function forEachStep(s: Scene, fn: (name: string, start: number, end: number, odd: boolean) => void): void {
  const { base, cur } = s.frames
  if (!base) return
  const useCur = cur && cur !== base && base.steps.capped
  const steps = useCur ? cur.steps : base.steps
  const v = s.viewport
  const i0 = Math.max(0, firstAtOrAfter(steps.end, v.start))
  for (let i = i0; i < steps.start.length && steps.start[i] <= v.end; i++) {
    const name = steps.name[i]
    const m = /(\d+)\s*$/.exec(name)
    const odd = m ? Number(m[1]) % 2 === 1 : i % 2 === 1
    fn(name, steps.start[i], steps.end[i], odd)
  }
}

export function drawGutter(kit: PaintKit, s: Scene, first: number, visible1: number): void {
  const { ctx, colors: c } = kit
  ctx.save()
  ctx.beginPath()
  ctx.rect(0, HEADER_H, GUTTER_W, s.h - HEADER_H)
  ctx.clip()
  ctx.fillStyle = c.surface2
  ctx.fillRect(0, HEADER_H, GUTTER_W, s.h - HEADER_H)
  ctx.textBaseline = 'middle'
  const items = s.layout.items
  for (let i = first; i < items.length; i++) {
    const it = items[i]
    if (it.y > visible1) break
    drawGutterItem(kit, s, it, s.top + it.y)
  }
  ctx.restore()
  ctx.fillStyle = c.border
  ctx.fillRect(GUTTER_W - 1, HEADER_H, 1, s.h - HEADER_H)
}

function drawGutterItem(kit: PaintKit, s: Scene, it: LayoutItem, y: number): void {
  const { ctx, colors: c } = kit
  if (it.type === 'group') {
    ctx.fillStyle = c.header
    ctx.fillRect(0, y, GUTTER_W, it.h)
    ctx.fillStyle = c.border
    ctx.fillRect(0, y, GUTTER_W, 1)
    ctx.fillRect(0, y + it.h - 1, GUTTER_W, 1)
    // chevron
    ctx.strokeStyle = c.muted
    ctx.lineWidth = 1.5
    ctx.beginPath()
    const cx = 13
    const cy = y + it.h / 2
    if (it.collapsed) {
      ctx.moveTo(cx - 2, cy - 4)
      ctx.lineTo(cx + 2, cy)
      ctx.lineTo(cx - 2, cy + 4)
    } else {
      ctx.moveTo(cx - 4, cy - 2)
      ctx.lineTo(cx, cy + 2)
      ctx.lineTo(cx + 4, cy - 2)
    }
    ctx.stroke()
    ctx.font = FONT_BOLD
    ctx.fillStyle = c.text
    kit.label(it.label, 24, cy + 0.5, GUTTER_W - 30)
    return
  }
  ctx.fillStyle = c.border
  ctx.fillRect(0, y + it.h - 1, GUTTER_W, 1)
  if (it.type === 'counter') {
    ctx.font = FONT
    ctx.fillStyle = c.text
    kit.label(it.name, 24, y + 11, GUTTER_W - 30)
    const max = it.unit === 'fraction' ? 1 : (s.counterMax.get(it.name) ?? 0)
    ctx.font = FONT_SMALL
    ctx.fillStyle = c.faint
    kit.label(`scale 0 – ${fmtCounter(max, it.unit)}`, 24, y + 25, GUTTER_W - 30)
    return
  }
  const t = it.track
  ctx.font = FONT
  ctx.fillStyle = c.text
  kit.label(t.thread || t.tid || '(no thread)', 24, y + TRACK_PAD + ROW_H / 2, GUTTER_W - 30)
  if (t.depth > 1 || it.h > ROW_H * 2) {
    ctx.font = FONT_SMALL
    ctx.fillStyle = c.faint
    kit.label(`${t.event_count.toLocaleString('en-US')} events`, 24, y + TRACK_PAD + ROW_H * 1.5, GUTTER_W - 30)
  }
  // kind marker
  ctx.fillStyle = t.kind === 'gpu' ? '#66bb6a' : t.kind === 'cpu' ? '#42a5f5' : c.faint
  ctx.fillRect(12, y + TRACK_PAD + 4, 3, ROW_H - 9)
}

export function drawHeader(kit: PaintKit, s: Scene): void {
  const { ctx, colors: c } = kit
  const v = s.viewport
  const W = s.w
  ctx.fillStyle = c.surface2
  ctx.fillRect(0, 0, W, HEADER_H)
  // Step band
  ctx.save()
  ctx.beginPath()
  ctx.rect(GUTTER_W, RULER_H, W - GUTTER_W, HEADER_H - RULER_H)
  ctx.clip()
  ctx.font = FONT_SMALL
  ctx.textBaseline = 'middle'
  const yb = RULER_H
  const hb = HEADER_H - RULER_H - 1
  forEachStep(s, (name, a, b, odd) => {
    const xa = xAt(v, a)
    const xb = xAt(v, b)
    ctx.fillStyle = odd ? (kit.dark ? 'rgba(255,152,0,0.20)' : 'rgba(245,124,0,0.16)') : kit.dark ? 'rgba(255,152,0,0.10)' : 'rgba(245,124,0,0.08)'
    ctx.fillRect(xa, yb + 2, Math.max(1, xb - xa - 1), hb - 3)
    const label = /^\d+$/.test(name) ? `Step ${name}` : name
    const l = Math.max(xa, GUTTER_W)
    const r = Math.min(xb, W)
    const tw = kit.measure(label)
    ctx.fillStyle = c.text
    if (r - l > tw + 8) ctx.fillText(label, (l + r) / 2 - tw / 2, yb + hb / 2 + 0.5)
    else if (r - l > 24) kit.label(label, l + 3, yb + hb / 2 + 0.5, r - l - 4)
  })
  ctx.restore()
  // Ruler
  ctx.save()
  ctx.beginPath()
  ctx.rect(GUTTER_W, 0, W - GUTTER_W, RULER_H)
  ctx.clip()
  const step = tickStep(v)
  ctx.font = FONT
  ctx.textBaseline = 'middle'
  ctx.fillStyle = c.faint
  const minor = step / 5
  for (let t = Math.ceil(v.start / minor) * minor; t <= v.end; t += minor) {
    ctx.fillRect(Math.round(xAt(v, t)), RULER_H - 4, 1, 4)
  }
  const t0 = Math.ceil(v.start / step) * step
  for (let t = t0; t <= v.end + step; t += step) {
    const x = Math.round(xAt(v, t))
    ctx.fillStyle = c.muted
    ctx.fillRect(x, 6, 1, RULER_H - 6)
    ctx.fillStyle = c.text
    ctx.fillText(fmtTick(t, step, Math.max(Math.abs(v.start), Math.abs(v.end))), x + 4, 11)
  }
  ctx.restore()
  ctx.fillStyle = c.border
  ctx.fillRect(0, HEADER_H - 1, W, 1)
  ctx.fillRect(GUTTER_W, RULER_H, W - GUTTER_W, 1)
  ctx.fillRect(GUTTER_W - 1, 0, 1, HEADER_H)
  // Gutter header: the window's span.
  ctx.font = FONT_BOLD
  ctx.fillStyle = c.text
  ctx.textBaseline = 'middle'
  ctx.fillText(fmtDuration(v.end - v.start), 12, 12)
  ctx.font = FONT_SMALL
  ctx.fillStyle = c.faint
  ctx.fillText(`from ${fmtTime(v.start)}`, 12, 31)
}

export function drawCrosshair(kit: PaintKit, s: Scene): void {
  const m = s.pointer
  if (!m || m.x < GUTTER_W) return
  const { ctx, colors } = kit
  ctx.fillStyle = colors.accent
  ctx.globalAlpha = 0.6
  ctx.fillRect(Math.round(m.x), HEADER_H, 1, s.h - HEADER_H)
  ctx.globalAlpha = 1
  const label = fmtTime(timeAt(s.viewport, m.x))
  ctx.font = FONT
  const tw = kit.measure(label) + 8
  let lx = m.x + 1
  if (lx + tw > s.w) lx = m.x - tw
  ctx.fillStyle = colors.accent
  ctx.fillRect(lx, 2, tw, RULER_H - 5)
  ctx.fillStyle = '#ffffff'
  ctx.textBaseline = 'middle'
  ctx.fillText(label, lx + 4, 11)
}
