// The Trace view's painter: draws one immutable Scene (frames, viewport, layout, selection) on
// the canvas with Canvas 2D. It owns no view state: the engine builds a Scene per animation
// frame and hands it over, so what is drawn depends on the Scene alone (plus cached colors,
// text widths and search flags, which only make it faster).
//
// Event rectangles are batched by color (RectBatch) and filled with one path per color.

import type { Theme } from '../../theme'
import { firstAtOrAfter, lastAtOrBefore, type CounterData, type Frame, type RowData } from './frame'
import type { EventRef, Frames } from './hit'
import { COUNTERS_GROUP, GROUP_H, HEADER_H, ROW_H, TRACK_PAD, firstVisible, type Layout } from './layout'
import { drawCrosshair, drawGutter, drawHeader, forEachStep, tickStep } from './paint-chrome'
import { FONT, PaintKit, RectBatch } from './paint-kit'
import { drawFlows, drawHoverOutline, drawRange, drawRelated, drawSelectedFlows, drawSelection } from './paint-links'
import { timeAt, xAt, type Viewport } from './viewport'

/** Everything one frame of the canvas shows. Built by the engine, never changed afterwards. */
export interface Scene {
  /** Canvas size in CSS px and its device pixel ratio. */
  readonly w: number
  readonly h: number
  readonly dpr: number
  readonly viewport: Viewport
  readonly frames: Frames
  readonly layout: Layout
  /** Canvas y of the layout's y = 0 (moves with the vertical scroll). */
  readonly top: number
  readonly selected: EventRef | null
  readonly related: readonly EventRef[]
  /** The event under the pointer (null while dragging). */
  readonly hover: EventRef | null
  /** The pointer, canvas px, for the crosshair (null while dragging or outside). */
  readonly pointer: { readonly x: number; readonly y: number } | null
  readonly flows: { readonly on: boolean; readonly catsOff: ReadonlySet<string> }
  /** Names matched by the search (others are dimmed), or null for no search. */
  readonly search: ReadonlySet<string> | null
  /** The largest value of each counter in the loaded frames (the counter tracks' scale). */
  readonly counterMax: ReadonlyMap<string, number>
  /** The selected time range (trace us) and the canvas rows it covers, or null. */
  readonly range: { readonly start: number; readonly end: number; readonly y0: number; readonly y1: number } | null
}

export class Painter {
  private readonly kit: PaintKit
  private pendingTheme: Theme | null = null
  private matchCache = new WeakMap<Frame, Uint8Array>()
  private matchFor: ReadonlySet<string> | null = null
  /** Flows of the selected event drawn in the last frame (its own and its chain's). */
  selectedFlows = 0

  constructor(ctx: CanvasRenderingContext2D, theme: Theme) {
    this.kit = new PaintKit(ctx, theme)
  }

  /** Colors are read from the CSS variables when the next frame is drawn: the shell writes
   * data-theme in its own effect, after the engine hears of the new theme. */
  setTheme(theme: Theme): void {
    this.pendingTheme = theme
  }

  /** Sizes the canvas to w x h CSS px at `dpr` device pixels per px (sharp on 2x screens). */
  resize(canvas: HTMLCanvasElement, w: number, h: number, dpr: number): void {
    canvas.style.width = `${w}px`
    canvas.style.height = `${h}px`
    canvas.width = Math.max(1, Math.round(w * dpr))
    canvas.height = Math.max(1, Math.round(h * dpr))
    this.kit.resetPattern()
  }

  paint(s: Scene): void {
    const { ctx } = this.kit
    if (this.pendingTheme) {
      this.kit.setTheme(this.pendingTheme)
      this.pendingTheme = null
    }
    const { w: W, h: H } = s
    const left = s.viewport.left
    ctx.setTransform(s.dpr, 0, 0, s.dpr, 0, 0)
    ctx.fillStyle = this.kit.colors.bg
    ctx.fillRect(0, 0, W, H)
    const { base, cur } = s.frames
    if (!base || W <= left) return

    const visible0 = Math.max(0, -s.top + HEADER_H)
    const visible1 = visible0 + (H - HEADER_H)
    const first = firstVisible(s.layout, visible0)

    // Content area (right of the gutter, below the header).
    ctx.save()
    clip(ctx, left, HEADER_H, W - left, H - HEADER_H)
    this.drawStepShading(s, HEADER_H, H)
    this.drawGrid(s, HEADER_H, H)
    const xCur0 = cur ? Math.max(left, xAt(s.viewport, cur.start)) : W
    const xCur1 = cur ? Math.min(W, xAt(s.viewport, cur.end)) : W
    if (base !== cur && (xCur0 > left || xCur1 < W)) {
      // Outside the current frame's window: the whole-trace frame.
      for (const [a, b] of [
        [left, xCur0],
        [xCur1, W],
      ]) {
        if (b - a < 0.5) continue
        ctx.save()
        clip(ctx, a, HEADER_H, b - a, H - HEADER_H)
        this.drawItems(s, base, first, visible1, a, b)
        ctx.restore()
      }
    }
    if (cur && xCur1 > xCur0) {
      ctx.save()
      clip(ctx, xCur0, HEADER_H, xCur1 - xCur0, H - HEADER_H)
      this.drawItems(s, cur, first, visible1, xCur0, xCur1)
      ctx.restore()
    }
    this.drawGroupBands(s, first, visible1)
    if (s.flows.on && cur) drawFlows(this.kit, s, cur)
    if (cur) this.selectedFlows = drawSelectedFlows(this.kit, s, cur)
    if (s.range) drawRange(this.kit, s)
    drawRelated(this.kit, s)
    drawSelection(this.kit, s)
    drawHoverOutline(this.kit, s)
    ctx.restore()

    drawGutter(this.kit, s, first, visible1)
    drawHeader(this.kit, s)
    drawCrosshair(this.kit, s)
  }

  private drawStepShading(s: Scene, y0: number, y1: number): void {
    const { ctx, colors } = this.kit
    const v = s.viewport
    ctx.fillStyle = colors.stepShade
    forEachStep(s, (_name, a, b, odd) => {
      if (!odd) return
      const xa = Math.max(v.left, xAt(v, a))
      const xb = Math.min(s.w, xAt(v, b))
      if (xb > xa) ctx.fillRect(xa, y0, xb - xa, y1 - y0)
    })
    // Step boundaries.
    ctx.fillStyle = colors.grid
    forEachStep(s, (_name, a) => {
      const xa = xAt(v, a)
      if (xa >= v.left && xa <= s.w) ctx.fillRect(Math.round(xa), y0, 1, y1 - y0)
    })
  }

  private drawGrid(s: Scene, y0: number, y1: number): void {
    const { ctx, colors } = this.kit
    const v = s.viewport
    const step = tickStep(v)
    ctx.fillStyle = colors.grid
    const t0 = Math.ceil(v.start / step) * step
    for (let t = t0; t <= v.end; t += step) ctx.fillRect(Math.round(xAt(v, t)), y0, 1, y1 - y0)
  }

  /** The rows of `frame` between canvas x `xa` and `xb`: fills first (batched), then labels. */
  private drawItems(s: Scene, frame: Frame, first: number, visible1: number, xa: number, xb: number): void {
    const items = s.layout.items
    const batch = new RectBatch()
    const labels: [RowData, number, number][] = []
    for (let i = first; i < items.length; i++) {
      const it = items[i]
      const y = s.top + it.y
      if (it.y > visible1) break
      if (it.type === 'track') {
        const rows = frame.rows[it.track.id]
        if (!rows) continue
        for (let d = 0; d < rows.length; d++) {
          const row = rows[d]
          if (row) this.collectRow(s, batch, frame, row, y + TRACK_PAD + d * ROW_H, ROW_H - 1, xa, xb, labels)
        }
      } else if (it.type === 'counter') {
        const data = frame.counters.find((c) => c.name === it.name)
        if (data) this.drawCounter(s, data, y, it.h, frame.end)
      } else if (it.type === 'group' && it.collapsed && it.key !== COUNTERS_GROUP) {
        // A collapsed process: its threads' outermost events, as a thin summary.
        for (const id of it.trackIds) {
          const row = frame.rows[id]?.[0]
          if (row) this.collectRow(s, batch, frame, row, y + GROUP_H - 9, 6, xa, xb, null)
        }
      }
    }
    batch.flush(this.kit.ctx)
    this.drawLabels(s, frame, labels, xa, xb)
  }

  /** Adds a row's merged blocks (hatched) and events to `batch`; queues labels of wide events. */
  private collectRow(s: Scene, batch: RectBatch, frame: Frame, row: RowData, y: number, h: number, xa: number, xb: number, labels: [RowData, number, number][] | null): void {
    const { pal } = this.kit
    const v = s.viewport
    const t0 = timeAt(v, xa - 1)
    const t1 = timeAt(v, xb + 1)
    const k = v.width / (v.end - v.start)
    const vs = v.start
    const flags = this.matchFlags(frame, s.search)

    if (row.blStart.length) {
      const hatch = this.kit.hatchPattern()
      const b0 = Math.max(0, firstAtOrAfter(row.blEnd, t0))
      for (let i = b0; i < row.blStart.length && row.blStart[i] <= t1; i++) {
        const x0 = v.left + (row.blStart[i] - vs) * k
        const x1 = v.left + (row.blEnd[i] - vs) * k
        batch.add(hatch, x0, y, Math.max(1, x1 - x0), h)
      }
    }
    const n = row.evStart.length
    const e0 = Math.max(0, firstAtOrAfter(row.evEnd, t0))
    for (let i = e0; i < n && row.evStart[i] <= t1; i++) {
      const x0 = v.left + (row.evStart[i] - vs) * k
      const x1 = v.left + (row.evEnd[i] - vs) * k
      const w = Math.max(x1 - x0, 1)
      const name = row.evName[i]
      const color = frame.nameColor[name] ?? 0
      const dim = flags ? !flags[name] : false
      batch.add(dim ? pal.dim[color] : pal.fill[color], x0, y, w, h)
      if (labels && w > 18) labels.push([row, i, y + h / 2 + 0.5])
    }
  }

  private drawLabels(s: Scene, frame: Frame, labels: [RowData, number, number][], xa: number, xb: number): void {
    if (labels.length === 0) return
    const { ctx, pal, colors } = this.kit
    const v = s.viewport
    const k = v.width / (v.end - v.start)
    const flags = this.matchFlags(frame, s.search)
    ctx.font = FONT
    ctx.textBaseline = 'middle'
    for (const [row, i, ty] of labels) {
      const x0 = Math.max(v.left + (row.evStart[i] - v.start) * k, xa)
      const x1 = Math.min(v.left + (row.evEnd[i] - v.start) * k, xb)
      const name = row.evName[i]
      const dim = flags ? !flags[name] : false
      ctx.fillStyle = dim ? colors.faint : pal.text[frame.nameColor[name] ?? 0]
      this.kit.label(frame.names[name] ?? '', x0 + 4, ty, x1 - x0 - 7)
    }
  }

  /** Per name code of `frame`: 1 if the search matches it (cached per frame and search). */
  private matchFlags(frame: Frame, names: ReadonlySet<string> | null): Uint8Array | null {
    if (!names) return null
    if (names !== this.matchFor) {
      this.matchFor = names
      this.matchCache = new WeakMap()
    }
    let flags = this.matchCache.get(frame)
    if (!flags) {
      flags = new Uint8Array(frame.names.length)
      for (let i = 0; i < frame.names.length; i++) flags[i] = names.has(frame.names[i]) ? 1 : 0
      this.matchCache.set(frame, flags)
    }
    return flags
  }

  private drawCounter(s: Scene, data: CounterData, y: number, h: number, frameEnd: number): void {
    const n = data.t.length
    if (!n) return
    const { ctx } = this.kit
    const v = s.viewport
    const max = data.unit === 'fraction' ? 1 : Math.max(s.counterMax.get(data.name) ?? data.max, 1e-9)
    const base = y + h - 3
    const scale = (h - 8) / max
    const [fill, stroke] = counterColor(data.kind)
    const i0 = Math.max(0, lastAtOrBefore(data.t, v.start))
    ctx.beginPath()
    let x = Math.max(xAt(v, data.t[i0]), v.left - 1)
    ctx.moveTo(x, base)
    for (let i = i0; i < n; i++) {
      const xs = Math.max(xAt(v, data.t[i]), v.left - 1)
      if (xs > s.w + 1) break
      const xe = Math.min(i + 1 < n ? xAt(v, data.t[i + 1]) : xAt(v, frameEnd), s.w + 1)
      const yv = base - Math.max(0, data.v[i]) * scale
      ctx.lineTo(xs, yv)
      ctx.lineTo(xe, yv)
      x = xe
    }
    ctx.lineTo(x, base)
    ctx.closePath()
    ctx.fillStyle = fill
    ctx.fill()
    ctx.strokeStyle = stroke
    ctx.lineWidth = 1
    ctx.stroke()
  }

  private drawGroupBands(s: Scene, first: number, visible1: number): void {
    const { ctx, colors: c } = this.kit
    const left = s.viewport.left
    const items = s.layout.items
    for (let i = first; i < items.length; i++) {
      const it = items[i]
      if (it.y > visible1) break
      const y = s.top + it.y
      if (it.type === 'group') {
        if (!it.collapsed) {
          ctx.fillStyle = c.header
          ctx.fillRect(left, y, s.w - left, it.h)
        }
        ctx.fillStyle = c.border
        ctx.fillRect(left, y, s.w - left, 1)
        ctx.fillRect(left, y + it.h - 1, s.w - left, 1)
      } else {
        ctx.fillStyle = c.border
        ctx.fillRect(left, y + it.h - 1, s.w - left, 1)
      }
    }
  }
}

function clip(ctx: CanvasRenderingContext2D, x: number, y: number, w: number, h: number): void {
  ctx.beginPath()
  ctx.rect(x, y, w, h)
  ctx.clip()
}

function counterColor(kind: string): [string, string] {
  switch (kind) {
    case 'gpu_utilization':
      return ['rgba(245,124,0,0.30)', '#ef6c00']
    case 'sm_efficiency':
      return ['rgba(0,137,123,0.28)', '#00897b']
    case 'memory_reserved':
      return ['rgba(121,134,203,0.22)', '#7986cb']
    default:
      return ['rgba(30,136,229,0.25)', '#1e88e5']
  }
}
