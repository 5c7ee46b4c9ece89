// The Trace view's engine: view window, level-of-detail loading, input and Canvas 2D drawing.
//
// React mounts the DOM once and hands it over; from then on everything that changes per frame
// (pan, zoom, hover, scroll) happens here, drawn in requestAnimationFrame, with no React render.
// React hears only about slow events: first load, selection, errors.
//
// Loading. The visible window [viewStart, viewEnd] (trace time, us from the first event) is
// fetched at the canvas width, 60 ms after the view last changed, with half a window of overscan
// on each side so short pans show data at once. A newer request aborts the older one. While a
// request is in flight, the last frame is drawn at the new scale; outside its window, the
// whole-trace frame loaded first fills in, so zooming out never shows an empty screen.

import type { Selection } from '../../api'
import { LoadingError } from '../../api'
import type { Theme } from '../../theme'
import { traceApi, type TrackInfo } from './api'
import { decodeFrame, firstAtOrAfter, lastAtOrBefore, type CounterData, type Frame, type RowData } from './frame'
import { COUNTERS_GROUP, GROUP_H, GUTTER_W, HEADER_H, ROW_H, RULER_H, TRACK_PAD, computeLayout, firstVisible, itemAt, type GroupItem, type Layout, type LayoutItem } from './layout'
import { palette, type Palette } from './palette'
import { fmtCounter, fmtDuration, fmtTick, fmtTime, niceStep } from './timefmt'

const DEBOUNCE_MS = 60
const OVERSCAN = 0.5
const MIN_SPAN_US = 0.05
const FONT = '11px Roboto, system-ui, "Helvetica Neue", Arial, sans-serif'
const FONT_BOLD = '500 12px Roboto, system-ui, "Helvetica Neue", Arial, sans-serif'
const FONT_SMALL = '10.5px Roboto, system-ui, "Helvetica Neue", Arial, sans-serif'
const MAX_WIDTH = 16384

/** Where an event is drawn: enough to outline it and to bring it into view. */
export interface EventRef {
  id: number
  name: string
  start: number // trace time (us)
  end: number
  track: number
  depth: number
}

export interface EngineInfo {
  viewStart: number
  viewEnd: number
  frame: Frame | null
  loading: boolean
}

export interface EngineCallbacks {
  /** The first frame arrived (or failed, or the server is still loading the trace). */
  onFirstFrame: (state: { status: 'pending'; progress: number | null } | { status: 'ok'; frame: Frame } | { status: 'error'; error: Error }) => void
  /** The user clicked an event (or cleared the selection). */
  onSelect: (ref: EventRef | null) => void
  /** A later request failed (the view keeps the last frame). */
  onFrameError: (error: Error | null) => void
}

interface Colors {
  bg: string
  surface2: string
  header: string
  border: string
  text: string
  muted: string
  faint: string
  accent: string
  link: string
  stepShade: string
  grid: string
  hatch: string
  hatchBg: string
  selection: string
}

type Hit =
  | { type: 'event'; row: RowData; index: number; frame: Frame; track: TrackInfo; depth: number }
  | { type: 'block'; row: RowData; index: number; frame: Frame; track: TrackInfo; depth: number }
  | { type: 'group'; item: GroupItem }
  | { type: 'counter'; name: string; unit: string; t: number }
  | null

const FLOW_COLORS: Record<string, string> = { ac2g: '#1e88e5', fwdbwd: '#8e24aa', async: '#00897b' }

export class TraceEngine {
  private readonly sel: Selection
  private readonly cb: EngineCallbacks
  private readonly root: HTMLElement
  private readonly scroller: HTMLElement
  private readonly canvas: HTMLCanvasElement
  private readonly spacer: HTMLElement
  private readonly tooltip: HTMLElement
  private readonly info: HTMLElement | null
  private readonly ctx: CanvasRenderingContext2D

  private cssW = 0
  private cssH = 0
  private dpr = 1
  private theme: Theme
  private colors!: Colors
  private pal: Palette
  private hatch: CanvasPattern | null = null
  private colorsDirty = false

  private viewStart = 0
  private viewEnd = 1
  private traceEnd = 1
  private base: Frame | null = null
  private cur: Frame | null = null
  private layout: Layout = { items: [], height: 0, trackY: new Map(), groupOf: new Map() }
  private collapsed = new Set<string>()
  private counterMeta: { name: string; unit: string; kind: string }[] = []
  private counterMax = new Map<string, number>()

  private selected: EventRef | null = null
  private related: EventRef[] = []
  private flowsOn = false
  private flowCatsOff = new Set<string>()
  private searchNames: Set<string> | null = null
  private matchCache = new WeakMap<Frame, Uint8Array>()

  private mouse: { x: number; y: number } | null = null
  private tipKey = ''
  private drag: { x: number; y: number; viewStart: number; viewEnd: number; scrollTop: number; moved: boolean; id: number } | null = null
  private keys = new Set<string>()
  private keyAnim = 0
  private keyLast = 0

  private raf = 0
  private fetchTimer = 0
  private inflight: AbortController | null = null
  private lastRequestKey = ''
  private requests = 0
  private draws = 0
  /** Recent draw() durations (ms), exposed as data-draw-ms="avg/max" for tests and profiling. */
  private drawMs: number[] = []
  private destroyed = false
  private textWidth = new Map<string, number>()
  private resizeObserver: ResizeObserver | null = null
  private readonly cleanups: (() => void)[] = []

  constructor(
    els: { root: HTMLElement; scroller: HTMLElement; canvas: HTMLCanvasElement; spacer: HTMLElement; tooltip: HTMLElement; info?: HTMLElement | null },
    sel: Selection,
    theme: Theme,
    cb: EngineCallbacks,
  ) {
    this.root = els.root
    this.scroller = els.scroller
    this.canvas = els.canvas
    this.spacer = els.spacer
    this.tooltip = els.tooltip
    this.info = els.info ?? null
    this.sel = sel
    this.cb = cb
    this.theme = theme
    this.pal = palette(theme)
    const ctx = this.canvas.getContext('2d', { alpha: false })
    if (!ctx) throw new Error('Canvas 2D is not available')
    this.ctx = ctx
    this.readColors()
    this.attach()
    this.resize()
    this.loadFirst()
  }

  // ------------------------------------------------------------------------------------------
  // Public API (called by React)

  destroy(): void {
    this.destroyed = true
    this.inflight?.abort()
    window.clearTimeout(this.fetchTimer)
    cancelAnimationFrame(this.raf)
    cancelAnimationFrame(this.keyAnim)
    this.resizeObserver?.disconnect()
    for (const off of this.cleanups) off()
  }

  setTheme(theme: Theme): void {
    if (theme === this.theme) return
    this.theme = theme
    this.pal = palette(theme)
    // The shell writes data-theme in its own effect, after ours: read the CSS variables when
    // drawing the next frame.
    this.colorsDirty = true
    this.requestDraw()
  }

  fit(): void {
    if (!this.base) return
    this.setView(0, Math.max(this.traceEnd, MIN_SPAN_US))
  }

  zoomBy(factor: number): void {
    const mid = (this.viewStart + this.viewEnd) / 2
    const span = (this.viewEnd - this.viewStart) * factor
    this.setView(mid - span / 2, mid + span / 2)
  }

  setFlows(on: boolean, catsOff: ReadonlySet<string>): void {
    this.flowsOn = on
    this.flowCatsOff = new Set(catsOff)
    this.root.dataset.flows = on ? 'on' : 'off'
    this.requestDraw()
  }

  /** Names matched by the current search (other events are dimmed), or null for no search. */
  setSearchNames(names: string[] | null): void {
    this.searchNames = names && names.length ? new Set(names) : null
    this.matchCache = new WeakMap()
    this.requestDraw()
  }

  /** Outline `ref` (from a click, a search match or a link); `reveal` brings it into view. */
  select(ref: EventRef | null, reveal = false): void {
    this.selected = ref
    this.related = []
    this.root.dataset.selected = ref ? String(ref.id) : ''
    if (ref && reveal) this.reveal(ref)
    this.requestDraw()
  }

  /** Correlated partners of the selection: drawn as links from it. */
  setRelated(refs: EventRef[]): void {
    this.related = refs
    this.requestDraw()
  }

  focusSelection(): void {
    if (this.selected) this.reveal(this.selected, true)
  }

  get traceStartUs(): number {
    return this.base?.traceStart ?? 0
  }

  // ------------------------------------------------------------------------------------------
  // View and loading

  private clampView(start: number, end: number): [number, number] {
    const full = Math.max(this.traceEnd, MIN_SPAN_US)
    const margin = full * 0.05
    let span = Math.min(Math.max(end - start, MIN_SPAN_US), full + 2 * margin)
    if (!Number.isFinite(span)) span = full
    let s = Number.isFinite(start) ? start : 0
    if (s < -margin) s = -margin
    if (s + span > full + margin) s = full + margin - span
    return [s, s + span]
  }

  private setView(start: number, end: number): void {
    const [s, e] = this.clampView(start, end)
    if (s === this.viewStart && e === this.viewEnd) return
    this.viewStart = s
    this.viewEnd = e
    this.root.dataset.viewStart = s.toFixed(3)
    this.root.dataset.viewEnd = e.toFixed(3)
    this.requestDraw()
    this.scheduleFetch()
  }

  private get trackW(): number {
    return Math.max(1, this.cssW - GUTTER_W)
  }

  private scheduleFetch(): void {
    window.clearTimeout(this.fetchTimer)
    this.fetchTimer = window.setTimeout(() => this.fetchView(), DEBOUNCE_MS)
  }

  private loadFirst(): void {
    const controller = new AbortController()
    this.inflight = controller
    this.root.dataset.state = 'loading'
    const attempt = () => {
      if (this.destroyed) return
      traceApi.timeline(this.sel, { width: Math.min(MAX_WIDTH, Math.max(this.trackW, 600)) }, controller.signal).then(
        (raw) => {
          if (this.destroyed) return
          const frame = decodeFrame(raw)
          this.inflight = null
          this.base = frame
          this.cur = frame
          this.traceEnd = Math.max(frame.traceEnd, MIN_SPAN_US)
          this.counterMeta = frame.counters.map((c) => ({ name: c.name, unit: c.unit, kind: c.kind }))
          this.updateCounterMax()
          this.relayout()
          this.lastRequestKey = ''
          this.viewStart = -1
          this.setView(0, this.traceEnd)
          window.clearTimeout(this.fetchTimer) // the first frame already is the fitted view
          this.requests++
          this.root.dataset.requests = String(this.requests)
          this.root.dataset.state = 'ready'
          this.root.dataset.traceStart = String(frame.traceStart)
          this.root.dataset.traceEnd = String(this.traceEnd)
          this.setFrameAttrs(frame)
          this.cb.onFirstFrame({ status: 'ok', frame })
        },
        (error: Error) => {
          if (this.destroyed || error.name === 'AbortError') return
          if (error instanceof LoadingError) {
            this.cb.onFirstFrame({ status: 'pending', progress: error.progress })
            window.setTimeout(attempt, 700)
            return
          }
          this.root.dataset.state = 'error'
          this.cb.onFirstFrame({ status: 'error', error })
        },
      )
    }
    attempt()
  }

  private fetchView(): void {
    if (this.destroyed || !this.base) return
    const span = this.viewEnd - this.viewStart
    const lo = Math.max(this.viewStart - OVERSCAN * span, 0)
    const hi = Math.min(this.viewEnd + OVERSCAN * span, this.traceEnd)
    if (!(hi > lo)) return
    const width = Math.min(MAX_WIDTH, Math.max(1, Math.round((this.trackW * (hi - lo)) / span)))
    const start = this.base.traceStart + lo
    const end = this.base.traceStart + hi
    const key = `${start.toFixed(3)}|${end.toFixed(3)}|${width}`
    if (key === this.lastRequestKey) return
    this.lastRequestKey = key
    this.inflight?.abort()
    const controller = new AbortController()
    this.inflight = controller
    this.requests++
    this.root.dataset.requests = String(this.requests)
    this.root.dataset.loading = '1'
    this.setLoading(true)
    const attempt = () => {
      traceApi.timeline(this.sel, { start, end, width }, controller.signal).then(
        (raw) => {
          if (this.destroyed || controller.signal.aborted) return
          const frame = decodeFrame(raw)
          this.cur = frame
          this.inflight = null
          this.updateCounterMax()
          this.setFrameAttrs(frame)
          this.root.dataset.loading = ''
          this.setLoading(false)
          this.cb.onFrameError(null)
          this.requestDraw()
        },
        (error: Error) => {
          if (this.destroyed || controller.signal.aborted || error.name === 'AbortError') return
          if (error instanceof LoadingError) {
            window.setTimeout(() => !controller.signal.aborted && attempt(), 500)
            return
          }
          this.inflight = null
          this.lastRequestKey = ''
          this.root.dataset.loading = ''
          this.setLoading(false)
          this.cb.onFrameError(error)
        },
      )
    }
    attempt()
  }

  private setLoading(on: boolean): void {
    this.root.classList.toggle('is-loading', on)
  }

  private setFrameAttrs(frame: Frame): void {
    this.root.dataset.frameStart = frame.start.toFixed(3)
    this.root.dataset.frameEnd = frame.end.toFixed(3)
    this.root.dataset.frameEvents = String(frame.stats.events)
  }

  private updateCounterMax(): void {
    this.counterMax.clear()
    for (const f of [this.base, this.cur]) {
      if (!f) continue
      for (const c of f.counters) this.counterMax.set(c.name, Math.max(this.counterMax.get(c.name) ?? 0, c.max))
    }
  }

  private relayout(): void {
    const tracks = (this.base?.tracks ?? []).filter(Boolean)
    this.layout = computeLayout(tracks, this.counterMeta, this.collapsed)
    this.root.dataset.contentHeight = String(this.layout.height)
    this.updateSpacer()
  }

  private updateSpacer(): void {
    const total = HEADER_H + this.layout.height + 8
    this.spacer.style.height = `${Math.max(0, total - this.cssH)}px`
  }

  toggleGroup(key: string): void {
    if (this.collapsed.has(key)) this.collapsed.delete(key)
    else this.collapsed.add(key)
    this.root.dataset.collapsed = String(this.collapsed.size)
    this.relayout()
    this.requestDraw()
  }

  private reveal(ref: EventRef, zoom = false): void {
    const span = this.viewEnd - this.viewStart
    const dur = Math.max(0, ref.end - ref.start)
    let newSpan = span
    if (dur > span * 0.8 || zoom) newSpan = Math.max(dur / 0.6, MIN_SPAN_US * 20)
    else if ((dur / span) * this.trackW < 24) newSpan = Math.min(span, Math.max(dur * 8, 20)) // wide enough for its label
    const inView = ref.start >= this.viewStart && ref.end <= this.viewEnd
    if (newSpan !== span || !inView) {
      const mid = (ref.start + ref.end) / 2
      this.setView(mid - newSpan / 2, mid + newSpan / 2)
    }
    // Vertically: expand its process and scroll its row into view.
    const group = this.layout.groupOf.get(ref.track)
    if (group && this.collapsed.has(group)) this.toggleGroup(group)
    const pos = this.layout.trackY.get(ref.track)
    if (pos) {
      const rowTop = pos.y + ref.depth * ROW_H
      const visibleTop = this.scroller.scrollTop
      const visibleH = this.cssH - HEADER_H
      if (rowTop < visibleTop + 4 || rowTop + ROW_H > visibleTop + visibleH - 4) {
        this.scroller.scrollTop = Math.max(0, rowTop - visibleH / 3)
      }
    }
  }

  // ------------------------------------------------------------------------------------------
  // Coordinates

  private x(t: number): number {
    return GUTTER_W + ((t - this.viewStart) / (this.viewEnd - this.viewStart)) * this.trackW
  }

  private t(x: number): number {
    return this.viewStart + ((x - GUTTER_W) / this.trackW) * (this.viewEnd - this.viewStart)
  }

  private get contentTop(): number {
    return HEADER_H - this.scroller.scrollTop
  }

  // ------------------------------------------------------------------------------------------
  // Input

  private attach(): void {
    const on = <K extends keyof HTMLElementEventMap>(el: HTMLElement | Window, type: K, fn: (e: HTMLElementEventMap[K]) => void, opts?: AddEventListenerOptions) => {
      el.addEventListener(type, fn as EventListener, opts)
      this.cleanups.push(() => el.removeEventListener(type, fn as EventListener, opts))
    }
    const c = this.canvas
    on(c, 'wheel', (e) => this.onWheel(e), { passive: false })
    on(c, 'pointerdown', (e) => this.onPointerDown(e))
    on(c, 'pointermove', (e) => this.onPointerMove(e))
    on(c, 'pointerup', (e) => this.onPointerUp(e))
    on(c, 'pointercancel', () => {
      this.drag = null
    })
    on(c, 'pointerleave', () => {
      if (!this.drag) {
        this.mouse = null
        this.hideTooltip()
        this.requestDraw()
      }
    })
    on(c, 'dblclick', (e) => {
      if (e.offsetX >= GUTTER_W) this.fit()
    })
    on(this.scroller, 'scroll', () => this.requestDraw(), { passive: true })
    on(window, 'keydown', (e) => this.onKey(e, true))
    on(window, 'keyup', (e) => this.onKey(e, false))
    on(window, 'blur', () => this.keys.clear())
    if (typeof ResizeObserver !== 'undefined') {
      this.resizeObserver = new ResizeObserver(() => this.resize())
      this.resizeObserver.observe(this.scroller)
    } else {
      on(window, 'resize', () => this.resize())
    }
  }

  private pos(e: MouseEvent): { x: number; y: number } {
    const r = this.canvas.getBoundingClientRect()
    return { x: e.clientX - r.left, y: e.clientY - r.top }
  }

  private onWheel(e: WheelEvent): void {
    if (!this.base) return
    e.preventDefault()
    const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? this.cssH : 1
    const dx = e.deltaX * unit
    const dy = e.deltaY * unit
    const { x } = this.pos(e)
    if (e.shiftKey || (x < GUTTER_W && !e.ctrlKey)) {
      // Shift+wheel, or the wheel over the track names: scroll the tracks.
      this.scroller.scrollTop += dy || dx
      return
    }
    const span = this.viewEnd - this.viewStart
    if (Math.abs(dx) > Math.abs(dy)) {
      const shift = (dx / this.trackW) * span
      this.setView(this.viewStart + shift, this.viewEnd + shift)
      return
    }
    const k = e.ctrlKey ? 0.01 : 0.0022 // pinch-zoom gestures arrive as ctrl+wheel with small deltas
    const factor = Math.exp(Math.max(-3, Math.min(3, dy * k)))
    const anchorX = Math.max(GUTTER_W, x)
    const at = this.t(anchorX)
    const newSpan = span * factor
    const frac = (anchorX - GUTTER_W) / this.trackW
    this.setView(at - frac * newSpan, at + (1 - frac) * newSpan)
  }

  private onPointerDown(e: PointerEvent): void {
    if (e.button !== 0) return
    const p = this.pos(e)
    this.drag = { x: p.x, y: p.y, viewStart: this.viewStart, viewEnd: this.viewEnd, scrollTop: this.scroller.scrollTop, moved: false, id: e.pointerId }
    try {
      this.canvas.setPointerCapture(e.pointerId)
    } catch {
      // synthetic or already released pointer: dragging still works while over the canvas
    }
  }

  private onPointerMove(e: PointerEvent): void {
    const p = this.pos(e)
    this.mouse = p
    const d = this.drag
    if (d) {
      const dx = p.x - d.x
      const dy = p.y - d.y
      if (!d.moved && Math.abs(dx) + Math.abs(dy) > 3) {
        d.moved = true
        this.root.classList.add('is-dragging')
        this.hideTooltip()
      }
      if (d.moved) {
        const shift = (-dx / this.trackW) * (d.viewEnd - d.viewStart)
        this.setView(d.viewStart + shift, d.viewEnd + shift)
        this.scroller.scrollTop = d.scrollTop - dy
        return
      }
    }
    this.requestDraw() // the hover (outline, tooltip) follows in the frame drawn next
  }

  private onPointerUp(e: PointerEvent): void {
    const d = this.drag
    this.drag = null
    this.root.classList.remove('is-dragging')
    if (this.canvas.hasPointerCapture?.(e.pointerId)) this.canvas.releasePointerCapture(e.pointerId)
    if (!d || d.moved) return
    this.root.focus({ preventScroll: true })
    const p = this.pos(e)
    const hit = this.hitTest(p.x, p.y)
    if (hit?.type === 'group') {
      this.toggleGroup(hit.item.key)
      return
    }
    if (hit?.type === 'event') {
      const ref = this.refOf(hit)
      this.select(ref)
      this.cb.onSelect(ref)
      return
    }
    if (hit?.type === 'block') {
      // A merged block: zoom in until its events separate.
      const s = hit.row.blStart[hit.index]
      const en = hit.row.blEnd[hit.index]
      const pad = (en - s) * 0.15 + MIN_SPAN_US
      this.setView(s - pad, en + pad)
      return
    }
    if (p.x >= GUTTER_W && p.y >= HEADER_H) {
      this.select(null)
      this.cb.onSelect(null)
    }
  }

  private refOf(hit: Extract<Hit, { type: 'event' }>): EventRef {
    const { row, index, frame, track, depth } = hit
    return { id: row.evId[index], name: frame.names[row.evName[index]] ?? '', start: row.evStart[index], end: row.evEnd[index], track: track.id, depth }
  }

  private onKey(e: KeyboardEvent, down: boolean): void {
    if (!down) {
      this.keys.delete(e.key.toLowerCase())
      return
    }
    if (e.ctrlKey || e.metaKey || e.altKey) return
    const target = e.target as HTMLElement | null
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) return
    if (!this.base || !this.root.isConnected) return
    const key = e.key.toLowerCase()
    if (key === 'escape' && this.selected) {
      this.select(null)
      this.cb.onSelect(null)
      return
    }
    if (key === 'f') {
      this.focusSelection()
      return
    }
    if (!'wasd'.includes(key) || key.length !== 1) return
    e.preventDefault()
    if (e.repeat || this.keys.has(key)) return
    this.keys.add(key)
    this.keyStep(key, 0.12) // a tap moves by a visible step; holding keeps moving
    this.keyLast = performance.now() + 120
    if (!this.keyAnim) this.keyAnim = requestAnimationFrame((t) => this.keyLoop(t))
  }

  private keyStep(key: string, amount: number): void {
    const span = this.viewEnd - this.viewStart
    if (key === 'a' || key === 'd') {
      const shift = (key === 'd' ? 1 : -1) * span * amount * 1.2
      this.setView(this.viewStart + shift, this.viewEnd + shift)
      return
    }
    const factor = key === 'w' ? Math.exp(-amount * 2.2) : Math.exp(amount * 2.2)
    const anchorX = this.mouse && this.mouse.x >= GUTTER_W ? this.mouse.x : GUTTER_W + this.trackW / 2
    const at = this.t(anchorX)
    const frac = (anchorX - GUTTER_W) / this.trackW
    const newSpan = span * factor
    this.setView(at - frac * newSpan, at + (1 - frac) * newSpan)
  }

  private keyLoop(now: number): void {
    this.keyAnim = 0
    if (this.keys.size === 0 || this.destroyed) return
    const dt = Math.min(0.05, Math.max(0, now - this.keyLast) / 1000)
    if (now > this.keyLast) {
      for (const key of this.keys) this.keyStep(key, dt)
      this.keyLast = now
    }
    this.keyAnim = requestAnimationFrame((t) => this.keyLoop(t))
  }

  private resize(): void {
    const w = this.scroller.clientWidth
    const h = this.scroller.clientHeight
    const dpr = window.devicePixelRatio || 1
    if (w === this.cssW && h === this.cssH && dpr === this.dpr) return
    const widthChanged = w !== this.cssW
    this.cssW = w
    this.cssH = h
    this.dpr = dpr
    this.canvas.style.width = `${w}px`
    this.canvas.style.height = `${h}px`
    this.canvas.width = Math.max(1, Math.round(w * dpr))
    this.canvas.height = Math.max(1, Math.round(h * dpr))
    this.hatch = null
    this.updateSpacer()
    this.draw()
    if (widthChanged && this.base) this.scheduleFetch()
  }

  // ------------------------------------------------------------------------------------------
  // Hit testing and hover

  private hitTest(x: number, y: number): Hit {
    if (y < HEADER_H) return null
    const cy = y - this.contentTop
    const item = itemAt(this.layout, cy)
    if (!item) return null
    if (item.type === 'group') return { type: 'group', item }
    if (x < GUTTER_W) return null
    const t = this.t(x)
    if (item.type === 'counter') return { type: 'counter', name: item.name, unit: item.unit, t }
    const depth = Math.floor((cy - item.y - TRACK_PAD) / ROW_H)
    if (depth < 0 || depth >= item.track.depth) return null
    const frame = this.frameAt(t)
    if (!frame) return null
    const row = frame.rows[item.track.id]?.[depth]
    if (!row) return null
    const tol = 2 * ((this.viewEnd - this.viewStart) / this.trackW)
    // Events first (they are what one aims at), then blocks.
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

  /** The frame that holds data at trace time t: the current one inside its window. */
  private frameAt(t: number): Frame | null {
    const cur = this.cur
    if (cur && t >= cur.start && t <= cur.end) return cur
    return this.base
  }

  private updateHover(): void {
    const m = this.mouse
    if (!m || this.drag?.moved) return this.hideTooltip()
    const hit = this.hitTest(m.x, m.y)
    const lines: [string, string][] = []
    let title = ''
    if (hit?.type === 'event') {
      const { row, index, frame } = hit
      title = frame.names[row.evName[index]] ?? ''
      lines.push(['Duration', fmtDuration(row.evEnd[index] - row.evStart[index])])
      lines.push(['Start', fmtTime(row.evStart[index])])
      lines.push(['Thread', hit.track.thread || hit.track.tid])
    } else if (hit?.type === 'block') {
      const { row, index } = hit
      title = `${row.blCount[index].toLocaleString('en-US')} events`
      lines.push(['Range', fmtDuration(row.blEnd[index] - row.blStart[index])])
      lines.push(['', 'Too small to draw one by one; click or zoom in'])
    } else if (hit?.type === 'counter') {
      const c = this.counterAt(hit.name, hit.t)
      title = hit.name
      lines.push(['Value', c === null ? '–' : fmtCounter(c, hit.unit)])
      lines.push(['At', fmtTime(hit.t)])
    } else if (hit?.type === 'group') {
      title = hit.item.label
      lines.push(['', `${hit.item.detail} · click to ${hit.item.collapsed ? 'expand' : 'collapse'}`])
    }
    if (!title) return this.hideTooltip()
    const tip = this.tooltip
    const key = `${title}\u0000${lines.join('\u0000')}`
    if (key === this.tipKey && !tip.hidden) return this.placeTooltip()
    this.tipKey = key
    tip.replaceChildren()
    const head = document.createElement('div')
    head.className = 'trace-tip-title'
    head.textContent = title
    tip.appendChild(head)
    for (const [k, v] of lines) {
      const row = document.createElement('div')
      row.className = 'trace-tip-row'
      if (k) {
        const key = document.createElement('span')
        key.className = 'trace-tip-key'
        key.textContent = k
        row.appendChild(key)
      }
      const val = document.createElement('span')
      val.textContent = v
      row.appendChild(val)
      tip.appendChild(row)
    }
    tip.hidden = false
    this.placeTooltip()
  }

  private placeTooltip(): void {
    const m = this.mouse
    const tip = this.tooltip
    if (!m) return
    const tw = tip.offsetWidth
    const th = tip.offsetHeight
    let left = m.x + 14
    let top = m.y + 16
    if (left + tw > this.cssW - 4) left = Math.max(4, m.x - tw - 10)
    if (top + th > this.cssH - 4) top = Math.max(4, m.y - th - 10)
    tip.style.transform = `translate(${Math.round(left)}px, ${Math.round(top)}px)`
  }

  private hideTooltip(): void {
    if (!this.tooltip.hidden) this.tooltip.hidden = true
    this.tipKey = ''
  }

  private counterAt(name: string, t: number): number | null {
    const frame = this.frameAt(t)
    const c = frame?.counters.find((s) => s.name === name)
    if (!c || c.t.length === 0) return null
    const i = lastAtOrBefore(c.t, t)
    return i >= 0 ? c.v[i] : null
  }

  // ------------------------------------------------------------------------------------------
  // Drawing

  requestDraw(): void {
    if (this.raf || this.destroyed) return
    this.raf = requestAnimationFrame(() => {
      this.raf = 0
      this.draw()
    })
  }

  private readColors(): void {
    const css = getComputedStyle(document.documentElement)
    const v = (name: string, fallback: string) => css.getPropertyValue(name).trim() || fallback
    const dark = this.theme === 'dark'
    this.colors = {
      bg: v('--surface', dark ? '#292a2d' : '#ffffff'),
      surface2: v('--surface-2', dark ? '#2d2e31' : '#fafafa'),
      header: dark ? '#323337' : '#f1f3f4',
      border: v('--border', dark ? '#3c4043' : '#e0e0e0'),
      text: v('--text', dark ? '#e8eaed' : '#212121'),
      muted: v('--muted', dark ? '#a9adb1' : '#616161'),
      faint: v('--faint', dark ? '#7b7f84' : '#9e9e9e'),
      accent: v('--accent', dark ? '#ff9800' : '#f57c00'),
      link: v('--link', dark ? '#8ab4f8' : '#1565c0'),
      stepShade: dark ? 'rgba(255,255,255,0.035)' : 'rgba(0,0,0,0.028)',
      grid: dark ? 'rgba(255,255,255,0.07)' : 'rgba(0,0,0,0.07)',
      hatch: dark ? 'rgba(255,255,255,0.22)' : 'rgba(0,0,0,0.2)',
      hatchBg: dark ? '#45474b' : '#d5d7da',
      selection: dark ? '#ffffff' : '#000000',
    }
    this.hatch = null
  }

  private hatchPattern(): CanvasPattern | string {
    if (this.hatch) return this.hatch
    const size = 6
    const tile = document.createElement('canvas')
    tile.width = size
    tile.height = size
    const g = tile.getContext('2d')
    if (!g) return this.colors.hatchBg
    g.fillStyle = this.colors.hatchBg
    g.fillRect(0, 0, size, size)
    g.strokeStyle = this.colors.hatch
    g.lineWidth = 1.5
    g.beginPath()
    g.moveTo(-1, size + 1)
    g.lineTo(size + 1, -1)
    g.moveTo(-1, 1)
    g.lineTo(1, -1)
    g.moveTo(size - 1, size + 1)
    g.lineTo(size + 1, size - 1)
    g.stroke()
    this.hatch = this.ctx.createPattern(tile, 'repeat')
    return this.hatch ?? this.colors.hatchBg
  }

  private measure(text: string): number {
    let w = this.textWidth.get(text)
    if (w === undefined) {
      w = this.ctx.measureText(text).width
      if (this.textWidth.size > 20000) this.textWidth.clear()
      this.textWidth.set(text, w)
    }
    return w
  }

  /** Draws `text` left-aligned in `avail` px, cut with an ellipsis; nothing if too narrow. */
  private label(text: string, x: number, y: number, avail: number): void {
    if (avail < 8 || !text) return
    const full = this.measure(text)
    if (full <= avail) {
      this.ctx.fillText(text, x, y)
      return
    }
    const chars = Math.floor((text.length * (avail - 8)) / full)
    if (chars < 2) return
    this.ctx.fillText(`${text.slice(0, chars)}…`, x, y)
  }

  private matchFlags(frame: Frame): Uint8Array | null {
    const names = this.searchNames
    if (!names) return null
    let flags = this.matchCache.get(frame)
    if (!flags) {
      flags = new Uint8Array(frame.names.length)
      for (let i = 0; i < frame.names.length; i++) flags[i] = names.has(frame.names[i]) ? 1 : 0
      this.matchCache.set(frame, flags)
    }
    return flags
  }

  draw(): void {
    if (this.destroyed) return
    const t0 = performance.now()
    this.paint()
    const ms = performance.now() - t0
    this.drawMs.push(ms)
    if (this.drawMs.length > 120) this.drawMs.shift()
  }

  private drawStats(): string {
    const list = this.drawMs
    if (!list.length) return ''
    let sum = 0
    let max = 0
    for (const v of list) {
      sum += v
      if (v > max) max = v
    }
    return `${(sum / list.length).toFixed(2)}/${max.toFixed(2)}`
  }

  private paint(): void {
    const ctx = this.ctx
    const c = this.colors
    const W = this.cssW
    const H = this.cssH
    this.draws++
    if (this.colorsDirty) {
      this.colorsDirty = false
      this.readColors()
    }
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0)
    ctx.fillStyle = c.bg
    ctx.fillRect(0, 0, W, H)
    if (!this.base || W <= GUTTER_W) return

    const top = this.contentTop
    const visible0 = Math.max(0, -top + HEADER_H)
    const visible1 = visible0 + (H - HEADER_H)
    const first = firstVisible(this.layout, visible0)

    // Content area (right of the gutter, below the header).
    ctx.save()
    ctx.beginPath()
    ctx.rect(GUTTER_W, HEADER_H, W - GUTTER_W, H - HEADER_H)
    ctx.clip()
    this.drawStepShading(HEADER_H, H)
    this.drawGrid(HEADER_H, H)
    const cur = this.cur
    const base = this.base
    const xCur0 = cur ? Math.max(GUTTER_W, this.x(cur.start)) : W
    const xCur1 = cur ? Math.min(W, this.x(cur.end)) : W
    if (base !== cur && (xCur0 > GUTTER_W || xCur1 < W)) {
      // Outside the current frame's window: the whole-trace frame.
      for (const [a, b] of [
        [GUTTER_W, xCur0],
        [xCur1, W],
      ]) {
        if (b - a < 0.5) continue
        ctx.save()
        ctx.beginPath()
        ctx.rect(a, HEADER_H, b - a, H - HEADER_H)
        ctx.clip()
        this.drawItems(base, first, visible1, top, a, b)
        ctx.restore()
      }
    }
    if (cur && xCur1 > xCur0) {
      ctx.save()
      ctx.beginPath()
      ctx.rect(xCur0, HEADER_H, xCur1 - xCur0, H - HEADER_H)
      ctx.clip()
      this.drawItems(cur, first, visible1, top, xCur0, xCur1)
      ctx.restore()
    }
    this.drawGroupBands(first, visible1, top)
    if (this.flowsOn && cur) this.drawFlows(cur, top)
    this.drawRelated(top)
    this.drawSelection(top)
    this.drawHoverOutline(top)
    ctx.restore()

    this.drawGutter(first, visible1, top)
    this.drawHeader()
    this.drawCrosshair()
    this.updateInfo()
    // The tooltip follows what is under the pointer now (a zoom or a new frame changes it too).
    if (this.mouse && !this.drag?.moved) this.updateHover()
  }

  private drawStepShading(y0: number, y1: number): void {
    const ctx = this.ctx
    ctx.fillStyle = this.colors.stepShade
    this.forEachStep((_name, a, b, odd) => {
      if (!odd) return
      const xa = Math.max(GUTTER_W, this.x(a))
      const xb = Math.min(this.cssW, this.x(b))
      if (xb > xa) ctx.fillRect(xa, y0, xb - xa, y1 - y0)
    })
    // Step boundaries.
    ctx.fillStyle = this.colors.grid
    this.forEachStep((_name, a) => {
      const xa = this.x(a)
      if (xa >= GUTTER_W && xa <= this.cssW) ctx.fillRect(Math.round(xa), y0, 1, y1 - y0)
    })
  }

  /** Steps visible in the view: the current frame's inside its window, the base's outside. */
  private forEachStep(fn: (name: string, start: number, end: number, odd: boolean) => void): void {
    const base = this.base
    if (!base) return
    const cur = this.cur
    const useCur = cur && cur !== base && base.steps.capped
    const steps = useCur ? cur.steps : base.steps
    const i0 = Math.max(0, firstAtOrAfter(steps.end, this.viewStart))
    for (let i = i0; i < steps.start.length && steps.start[i] <= this.viewEnd; i++) {
      const name = steps.name[i]
      const m = /(\d+)\s*$/.exec(name)
      const odd = m ? Number(m[1]) % 2 === 1 : i % 2 === 1
      fn(name, steps.start[i], steps.end[i], odd)
    }
  }

  private drawGrid(y0: number, y1: number): void {
    const ctx = this.ctx
    const { step } = this.ticks()
    ctx.fillStyle = this.colors.grid
    const t0 = Math.ceil(this.viewStart / step) * step
    for (let t = t0; t <= this.viewEnd; t += step) {
      const x = Math.round(this.x(t))
      ctx.fillRect(x, y0, 1, y1 - y0)
    }
  }

  private ticks(): { step: number } {
    const usPerPx = (this.viewEnd - this.viewStart) / this.trackW
    return { step: niceStep(usPerPx * 100) }
  }

  private drawItems(frame: Frame, first: number, visible1: number, top: number, xa: number, xb: number): void {
    const items = this.layout.items
    for (let i = first; i < items.length; i++) {
      const it = items[i]
      const y = top + it.y
      if (it.y > visible1) break
      if (it.type === 'track') {
        const rows = frame.rows[it.track.id]
        if (!rows) continue
        for (let d = 0; d < rows.length; d++) {
          const row = rows[d]
          if (row) this.drawRow(frame, row, y + TRACK_PAD + d * ROW_H, ROW_H - 1, xa, xb, true)
        }
      } else if (it.type === 'counter') {
        const data = frame.counters.find((s) => s.name === it.name)
        if (data) this.drawCounter(data, y, it.h, frame.end)
      } else if (it.type === 'group' && it.collapsed && it.key !== COUNTERS_GROUP) {
        // A collapsed process: its threads' outermost events, as a thin summary.
        for (const id of it.trackIds) {
          const row = frame.rows[id]?.[0]
          if (row) this.drawRow(frame, row, y + GROUP_H - 9, 6, xa, xb, false)
        }
      }
    }
  }

  private drawRow(frame: Frame, row: RowData, y: number, h: number, xa: number, xb: number, labels: boolean): void {
    const ctx = this.ctx
    const pal = this.pal
    const t0 = this.t(xa - 1)
    const t1 = this.t(xb + 1)
    const k = this.trackW / (this.viewEnd - this.viewStart)
    const vs = this.viewStart
    const flags = this.matchFlags(frame)

    // Merged blocks (hatched).
    if (row.blStart.length) {
      ctx.fillStyle = this.hatchPattern()
      const b0 = Math.max(0, firstAtOrAfter(row.blEnd, t0))
      for (let i = b0; i < row.blStart.length && row.blStart[i] <= t1; i++) {
        const x0 = GUTTER_W + (row.blStart[i] - vs) * k
        const x1 = GUTTER_W + (row.blEnd[i] - vs) * k
        ctx.fillRect(x0, y, Math.max(1, x1 - x0), h)
      }
    }

    const n = row.evStart.length
    if (!n) return
    const e0 = Math.max(0, firstAtOrAfter(row.evEnd, t0))
    let lastColor = -1
    let lastDim = -1
    let labelQueue: number[] | null = labels ? [] : null
    for (let i = e0; i < n && row.evStart[i] <= t1; i++) {
      const x0 = GUTTER_W + (row.evStart[i] - vs) * k
      const x1 = GUTTER_W + (row.evEnd[i] - vs) * k
      const w = Math.max(x1 - x0, 1)
      const name = row.evName[i]
      const color = frame.nameColor[name] ?? 0
      const dim = flags ? (flags[name] ? 0 : 1) : 0
      if (color !== lastColor || dim !== lastDim) {
        ctx.fillStyle = dim ? pal.dim[color] : pal.fill[color]
        lastColor = color
        lastDim = dim
      }
      ctx.fillRect(x0, y, w, h)
      if (labelQueue && w > 18) labelQueue.push(i)
    }
    if (!labelQueue || labelQueue.length === 0) return
    ctx.font = FONT
    ctx.textBaseline = 'middle'
    const ty = y + h / 2 + 0.5
    for (const i of labelQueue) {
      const x0 = Math.max(GUTTER_W + (row.evStart[i] - vs) * k, xa)
      const x1 = Math.min(GUTTER_W + (row.evEnd[i] - vs) * k, xb)
      const name = row.evName[i]
      const dim = flags ? !flags[name] : false
      ctx.fillStyle = dim ? this.colors.faint : pal.text[frame.nameColor[name] ?? 0]
      this.label(frame.names[name] ?? '', x0 + 4, ty, x1 - x0 - 7)
    }
    labelQueue = null
  }

  private counterColor(kind: string): [string, string] {
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

  private drawCounter(data: CounterData, y: number, h: number, frameEnd: number): void {
    const n = data.t.length
    if (!n) return
    const ctx = this.ctx
    const max = data.unit === 'fraction' ? 1 : Math.max(this.counterMax.get(data.name) ?? data.max, 1e-9)
    const base = y + h - 3
    const scale = (h - 8) / max
    const [fill, stroke] = this.counterColor(data.kind)
    const i0 = Math.max(0, lastAtOrBefore(data.t, this.viewStart))
    ctx.beginPath()
    let x = Math.max(this.x(data.t[i0]), GUTTER_W - 1)
    ctx.moveTo(x, base)
    for (let i = i0; i < n; i++) {
      const xs = Math.max(this.x(data.t[i]), GUTTER_W - 1)
      if (xs > this.cssW + 1) break
      const xe = Math.min(i + 1 < n ? this.x(data.t[i + 1]) : this.x(frameEnd), this.cssW + 1)
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

  private drawGroupBands(first: number, visible1: number, top: number): void {
    const ctx = this.ctx
    const c = this.colors
    const items = this.layout.items
    for (let i = first; i < items.length; i++) {
      const it = items[i]
      if (it.y > visible1) break
      const y = top + it.y
      if (it.type === 'group') {
        if (!it.collapsed) {
          ctx.fillStyle = c.header
          ctx.fillRect(GUTTER_W, y, this.cssW - GUTTER_W, it.h)
        }
        ctx.fillStyle = c.border
        ctx.fillRect(GUTTER_W, y, this.cssW - GUTTER_W, 1)
        ctx.fillRect(GUTTER_W, y + it.h - 1, this.cssW - GUTTER_W, 1)
      } else {
        ctx.fillStyle = c.border
        ctx.fillRect(GUTTER_W, y + it.h - 1, this.cssW - GUTTER_W, 1)
      }
    }
  }

  private rowCenter(track: number, depth: number, top: number): number | null {
    const pos = this.layout.trackY.get(track)
    if (!pos) return null
    if (pos.collapsed) return top + pos.y + GROUP_H / 2
    return top + pos.y + depth * ROW_H + (ROW_H - 1) / 2
  }

  private arrow(x0: number, y0: number, x1: number, y1: number, color: string, width: number, halo: boolean): void {
    const ctx = this.ctx
    const dx = Math.max(12, Math.abs(x1 - x0) * 0.4)
    ctx.beginPath()
    ctx.moveTo(x0, y0)
    if (Math.abs(y1 - y0) < 1) ctx.lineTo(x1, y1)
    else ctx.bezierCurveTo(x0 + dx, y0, x1 - dx, y1, x1, y1)
    if (halo) {
      // A halo in the background color keeps the line readable over colored slices.
      ctx.strokeStyle = this.colors.bg
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
    const s = 3 + width * 1.5
    ctx.beginPath()
    ctx.moveTo(x1, y1)
    ctx.lineTo(x1 - s * Math.cos(angle - 0.45), y1 - s * Math.sin(angle - 0.45))
    ctx.lineTo(x1 - s * Math.cos(angle + 0.45), y1 - s * Math.sin(angle + 0.45))
    ctx.closePath()
    ctx.fill()
    ctx.beginPath()
    ctx.arc(x0, y0, width + 0.8, 0, Math.PI * 2)
    ctx.fill()
  }

  private drawFlows(frame: Frame, top: number): void {
    const f = frame.flows
    const ctx = this.ctx
    const shown: number[] = []
    for (let i = 0; i < f.count; i++) {
      const cat = f.cats[f.cat[i]] ?? ''
      if (this.flowCatsOff.has(cat)) continue
      const y0 = this.rowCenter(f.fromTrack[i], f.fromDepth[i], top)
      const y1 = this.rowCenter(f.toTrack[i], f.toDepth[i], top)
      if (y0 === null || y1 === null) continue
      if (Math.max(y0, y1) < HEADER_H || Math.min(y0, y1) > this.cssH) continue
      const x0 = this.x(f.fromT[i])
      const x1 = this.x(f.toT[i])
      if (Math.max(x0, x1) < GUTTER_W || Math.min(x0, x1) > this.cssW) continue
      shown.push(i, x0, y0, x1, y1)
    }
    for (const halo of [true, false]) {
      ctx.globalAlpha = halo ? 0.6 : 0.85
      for (let k = 0; k < shown.length; k += 5) {
        const cat = f.cats[f.cat[shown[k]]] ?? ''
        this.arrow(shown[k + 1], shown[k + 2], shown[k + 3], shown[k + 4], FLOW_COLORS[cat] ?? '#757575', 1, halo)
      }
    }
    ctx.globalAlpha = 1
  }

  private drawRelated(top: number): void {
    const sel = this.selected
    if (!sel || this.related.length === 0) return
    const ys = this.rowCenter(sel.track, sel.depth, top)
    if (ys === null) return
    for (const r of this.related) {
      const yr = this.rowCenter(r.track, r.depth, top)
      if (yr === null) continue
      const [a, b] = sel.start <= r.start ? [sel, r] : [r, sel]
      const ya = a === sel ? ys : yr
      const yb = a === sel ? yr : ys
      for (const halo of [true, false]) this.arrow(this.x(a.start), ya, this.x(b.start), yb, this.colors.accent, 1.5, halo)
      this.outline(r, top, this.colors.accent, 1.5)
    }
  }

  private outline(ref: EventRef, top: number, color: string, width: number): void {
    const pos = this.layout.trackY.get(ref.track)
    if (!pos || pos.collapsed) return
    const y = top + pos.y + ref.depth * ROW_H
    let x0 = this.x(ref.start)
    let x1 = this.x(ref.end)
    if (x1 - x0 < 3) {
      const mid = (x0 + x1) / 2
      x0 = mid - 1.5
      x1 = mid + 1.5
    }
    x0 = Math.max(x0, GUTTER_W - 4)
    x1 = Math.min(x1, this.cssW + 4)
    if (x1 < GUTTER_W || x0 > this.cssW) return
    const ctx = this.ctx
    ctx.strokeStyle = color
    ctx.lineWidth = width
    ctx.strokeRect(x0 + width / 2, y + width / 2 - 0.5, x1 - x0 - width, ROW_H - width)
  }

  private drawSelection(top: number): void {
    if (!this.selected) return
    this.outline(this.selected, top, this.colors.selection, 2)
  }

  private drawHoverOutline(top: number): void {
    const m = this.mouse
    if (!m || this.drag?.moved) return
    const hit = this.hitTest(m.x, m.y)
    if (hit?.type !== 'event') return
    const ref = this.refOf(hit)
    if (this.selected && this.selected.id === ref.id) return
    this.outline(ref, top, this.colors.muted, 1)
  }

  private drawGutter(first: number, visible1: number, top: number): void {
    const ctx = this.ctx
    const c = this.colors
    ctx.save()
    ctx.beginPath()
    ctx.rect(0, HEADER_H, GUTTER_W, this.cssH - HEADER_H)
    ctx.clip()
    ctx.fillStyle = c.surface2
    ctx.fillRect(0, HEADER_H, GUTTER_W, this.cssH - HEADER_H)
    ctx.textBaseline = 'middle'
    const items = this.layout.items
    for (let i = first; i < items.length; i++) {
      const it = items[i]
      if (it.y > visible1) break
      const y = top + it.y
      this.drawGutterItem(it, y)
    }
    ctx.restore()
    ctx.fillStyle = c.border
    ctx.fillRect(GUTTER_W - 1, HEADER_H, 1, this.cssH - HEADER_H)
  }

  private drawGutterItem(it: LayoutItem, y: number): void {
    const ctx = this.ctx
    const c = this.colors
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
      this.label(it.label, 24, cy + 0.5, GUTTER_W - 30)
      return
    }
    ctx.fillStyle = c.border
    ctx.fillRect(0, y + it.h - 1, GUTTER_W, 1)
    if (it.type === 'counter') {
      ctx.font = FONT
      ctx.fillStyle = c.text
      this.label(it.name, 24, y + 11, GUTTER_W - 30)
      const max = it.unit === 'fraction' ? 1 : (this.counterMax.get(it.name) ?? 0)
      ctx.font = FONT_SMALL
      ctx.fillStyle = c.faint
      this.label(`scale 0 – ${fmtCounter(max, it.unit)}`, 24, y + 25, GUTTER_W - 30)
      return
    }
    const t = it.track
    ctx.font = FONT
    ctx.fillStyle = c.text
    this.label(t.thread || t.tid || '(no thread)', 24, y + TRACK_PAD + ROW_H / 2, GUTTER_W - 30)
    if (t.depth > 1 || it.h > ROW_H * 2) {
      ctx.font = FONT_SMALL
      ctx.fillStyle = c.faint
      this.label(`${t.event_count.toLocaleString('en-US')} events`, 24, y + TRACK_PAD + ROW_H * 1.5, GUTTER_W - 30)
    }
    // kind marker
    ctx.fillStyle = t.kind === 'gpu' ? '#66bb6a' : t.kind === 'cpu' ? '#42a5f5' : c.faint
    ctx.fillRect(12, y + TRACK_PAD + 4, 3, ROW_H - 9)
  }

  private drawHeader(): void {
    const ctx = this.ctx
    const c = this.colors
    const W = this.cssW
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
    this.forEachStep((name, a, b, odd) => {
      const xa = this.x(a)
      const xb = this.x(b)
      ctx.fillStyle = odd ? (this.theme === 'dark' ? 'rgba(255,152,0,0.20)' : 'rgba(245,124,0,0.16)') : this.theme === 'dark' ? 'rgba(255,152,0,0.10)' : 'rgba(245,124,0,0.08)'
      ctx.fillRect(xa, yb + 2, Math.max(1, xb - xa - 1), hb - 3)
      const label = /^\d+$/.test(name) ? `Step ${name}` : name
      const l = Math.max(xa, GUTTER_W)
      const r = Math.min(xb, W)
      const tw = this.measure(label)
      ctx.fillStyle = c.text
      if (r - l > tw + 8) ctx.fillText(label, (l + r) / 2 - tw / 2, yb + hb / 2 + 0.5)
      else if (r - l > 24) this.label(label, l + 3, yb + hb / 2 + 0.5, r - l - 4)
    })
    ctx.restore()
    // Ruler
    ctx.save()
    ctx.beginPath()
    ctx.rect(GUTTER_W, 0, W - GUTTER_W, RULER_H)
    ctx.clip()
    const { step } = this.ticks()
    ctx.font = FONT
    ctx.textBaseline = 'middle'
    ctx.fillStyle = c.faint
    const minor = step / 5
    for (let t = Math.ceil(this.viewStart / minor) * minor; t <= this.viewEnd; t += minor) {
      ctx.fillRect(Math.round(this.x(t)), RULER_H - 4, 1, 4)
    }
    const t0 = Math.ceil(this.viewStart / step) * step
    for (let t = t0; t <= this.viewEnd + step; t += step) {
      const x = Math.round(this.x(t))
      ctx.fillStyle = c.muted
      ctx.fillRect(x, 6, 1, RULER_H - 6)
      ctx.fillStyle = c.text
      ctx.fillText(fmtTick(t, step, Math.max(Math.abs(this.viewStart), Math.abs(this.viewEnd))), x + 4, 11)
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
    ctx.fillText(fmtDuration(this.viewEnd - this.viewStart), 12, 12)
    ctx.font = FONT_SMALL
    ctx.fillStyle = c.faint
    ctx.fillText(`from ${fmtTime(this.viewStart)}`, 12, 31)
  }

  private drawCrosshair(): void {
    const m = this.mouse
    if (!m || m.x < GUTTER_W || this.drag?.moved) return
    const ctx = this.ctx
    ctx.fillStyle = this.colors.accent
    ctx.globalAlpha = 0.6
    ctx.fillRect(Math.round(m.x), HEADER_H, 1, this.cssH - HEADER_H)
    ctx.globalAlpha = 1
    const label = fmtTime(this.t(m.x))
    ctx.font = FONT
    const tw = this.measure(label) + 8
    let lx = m.x + 1
    if (lx + tw > this.cssW) lx = m.x - tw
    ctx.fillStyle = this.colors.accent
    ctx.fillRect(lx, 2, tw, RULER_H - 5)
    ctx.fillStyle = '#ffffff'
    ctx.textBaseline = 'middle'
    ctx.fillText(label, lx + 4, 11)
  }

  private updateInfo(): void {
    const el = this.info
    const f = this.cur
    if (!el || !f) return
    const s = f.stats
    const merged = s.hidden ? ` · ${s.hidden.toLocaleString('en-US')} in ${s.blocks.toLocaleString('en-US')} merged blocks` : ''
    const text = `${s.events.toLocaleString('en-US')} events loaded${merged}`
    if (el.textContent !== text) el.textContent = text
    this.root.dataset.draws = String(this.draws)
    this.root.dataset.drawMs = this.drawStats()
  }
}

