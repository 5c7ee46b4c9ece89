// The Trace view's engine: the shell that composes the viewport maths (viewport.ts), the
// level-of-detail loader (lod-loader.ts), input (input.ts), hit testing (hit.ts), the tooltip
// (tooltip.ts) and the painter (painter.ts), and holds the view's state.
//
// React mounts the DOM once and hands it over; from then on everything that changes per frame
// (pan, zoom, hover, scroll) happens here, drawn in requestAnimationFrame, with no React render.
// React hears only about slow events: first load, selection, errors. While a window request is
// in flight, the last frame is drawn at the new scale; outside its window, the whole-trace frame
// loaded first fills in, so zooming out never shows an empty screen.

import type { Selection } from '../../api'
import type { Theme } from '../../theme'
import { traceApi, type RawTimeline } from './api'
import { DebugProbe, debugEnabled } from './debug'
import { counterMaxima, type Frame } from './frame'
import { hitTest, refOf, type EventRef, type Frames, type Hit } from './hit'
import { Input, type InputHost } from './input'
import { GUTTER_W, HEADER_H, computeLayout, rowScrollTop, type Layout } from './layout'
import { LodLoader, type FetchJson, type TimelineWindow } from './lod-loader'
import { Painter, type Scene } from './painter'
import { fmtLoaded } from './timefmt'
import { Tooltip, describe } from './tooltip'
import { NO_ARRANGEMENT, expand, toggleCollapsed, toggleHidden, type TrackList } from './trackList'
import { MIN_SPAN_US, clampView, makeViewport, revealWindow, timeAt, zoomCentered, type TimeWindow, type Viewport } from './viewport'

export type { EventRef } from './hit'

export interface EngineCallbacks {
  /** The first frame arrived (or failed, or the server is still loading the trace). */
  onFirstFrame: (state: { status: 'pending'; progress: number | null } | { status: 'ok'; frame: Frame } | { status: 'error'; error: Error }) => void
  /** The user clicked an event (or cleared the selection). */
  onSelect: (ref: EventRef | null) => void
  /** A later request failed (the view keeps the last frame). */
  onFrameError: (error: Error | null) => void
  /** A time range was selected (absolute trace us, track ids), or cleared (null). */
  onRange: (range: { start: number; end: number; tracks: number[] } | null) => void
  /** The user rearranged the track list on the canvas (collapsed a group, revealed a track). */
  onTrackList: (list: TrackList) => void
}

/** Where the engine's windows come from: a URL per window, fetched by `fetchJson`. */
export interface TimelineSource {
  url: (window: TimelineWindow) => string
  fetchJson?: FetchJson<RawTimeline>
}

export interface EngineElements {
  root: HTMLElement
  scroller: HTMLElement
  canvas: HTMLCanvasElement
  spacer: HTMLElement
  tooltip: HTMLElement
  info?: HTMLElement | null
}

export class TraceEngine implements InputHost {
  private readonly painter: Painter
  private readonly loader: LodLoader
  private readonly input: Input
  private readonly tooltip: Tooltip
  private readonly probe: DebugProbe | null

  private w = 0
  private h = 0
  private dpr = 1
  private view: TimeWindow = [0, 1]
  private traceEnd = 1
  private frames: Frames = { base: null, cur: null }
  private layout: Layout = { items: [], height: 0, trackY: new Map(), groupOf: new Map() }
  private trackList: TrackList = NO_ARRANGEMENT
  private counterMax = new Map<string, number>()
  private state: 'loading' | 'ready' | 'error' = 'loading'
  private loading = false
  private selected: EventRef | null = null
  private related: EventRef[] = []
  private range: { start: number; end: number; y0: number; y1: number } | null = null
  private flows: Scene['flows'] = { on: false, catsOff: new Set() }
  private searchNames: ReadonlySet<string> | null = null
  /** The step whose critical path is highlighted (asked of the server with every window). */
  private critical: string | null = null
  /** A window (trace us, absolute) to show once the first frame is in (`showWindow`). */
  private pendingWindow: TimeWindow | null = null
  private raf = 0
  private draws = 0
  private destroyed = false
  private readonly els: EngineElements
  private readonly cb: EngineCallbacks

  /** `critical`: the step whose critical path is highlighted; `source` replaces the `/timeline`
   * window requests (the multi-rank timeline's `/ranks`). */
  constructor(els: EngineElements, sel: Selection, theme: Theme, cb: EngineCallbacks, critical: string | null = null, source?: TimelineSource) {
    this.els = els
    this.cb = cb
    this.critical = critical || null
    const ctx = els.canvas.getContext('2d', { alpha: false })
    if (!ctx) throw new Error('Canvas 2D is not available')
    this.painter = new Painter(ctx, theme)
    this.tooltip = new Tooltip(els.tooltip)
    this.probe = debugEnabled() ? new DebugProbe(els.root) : null
    this.loader = new LodLoader(source?.fetchJson ?? traceApi.timeline, source?.url ?? ((win) => traceApi.timelineUrl(sel, win, this.critical)), {
      onPending: (progress) => this.cb.onFirstFrame({ status: 'pending', progress }),
      onFirst: (frame) => this.firstFrame(frame),
      onFirstError: (error) => {
        this.state = 'error'
        this.publish()
        this.cb.onFirstFrame({ status: 'error', error })
      },
      onFrame: (frame) => {
        this.frames = { base: this.frames.base, cur: frame }
        this.counterMax = counterMaxima(this.frames.base, this.frames.cur)
        this.publish()
        this.cb.onFrameError(null)
        this.requestDraw()
      },
      onFrameError: (error) => this.cb.onFrameError(error),
      onLoading: (on) => {
        this.loading = on
        els.root.classList.toggle('is-loading', on)
        this.publish()
      },
      onScheduled: () => this.publish(),
    })
    this.input = new Input(this, els)
    this.resize()
    this.publish()
    this.loader.loadFirst(this.viewport.width)
  }

  // ------------------------------------------------------------------------------------------
  // Public API (called by React)

  destroy(): void {
    this.destroyed = true
    this.loader.destroy()
    this.input.destroy()
    cancelAnimationFrame(this.raf)
  }

  setTheme(theme: Theme): void {
    this.painter.setTheme(theme)
    this.requestDraw()
  }

  /** Show [start, end] (absolute trace us, e.g. a recommendation's evidence) with a 5% margin
   * on each side; before the first frame, once it arrives. */
  showWindow(win: TimeWindow): void {
    const base = this.frames.base
    if (!base) {
      this.pendingWindow = win
      return
    }
    this.pendingWindow = null
    const start = win[0] - base.traceStart
    const end = win[1] - base.traceStart
    if (!(end > 0 && start < this.traceEnd)) return // another trace's window: keep the view
    const pad = Math.max((end - start) * 0.05, MIN_SPAN_US)
    this.setView([Math.max(0, start - pad), end + pad])
  }

  fit(): void {
    if (this.frames.base) this.setView([0, Math.max(this.traceEnd, MIN_SPAN_US)])
  }

  zoomBy(factor: number): void {
    this.setView(zoomCentered(this.viewport, factor))
  }

  setFlows(on: boolean, catsOff: ReadonlySet<string>): void {
    this.flows = { on, catsOff: new Set(catsOff) }
    this.publish()
    this.requestDraw()
  }

  /** Names matched by the current search (other events are dimmed), or null for no search. */
  setSearchNames(names: string[] | null): void {
    this.searchNames = names && names.length ? new Set(names) : null
    this.requestDraw()
  }

  /** Highlight the critical path of `step` (null: clear it). A new step is fetched with the next
   * window; clearing only stops drawing it. */
  setCritical(step: string | null): void {
    const next = step || null
    if (next === this.critical) return
    this.critical = next
    if (next) {
      this.loader.invalidate()
      this.scheduleFetch()
    }
    this.publish()
    this.requestDraw()
  }

  /** Outline `ref` (from a click, a search match or a link); `reveal` brings it into view. */
  select(ref: EventRef | null, reveal = false): void {
    this.selected = ref
    this.related = []
    this.publish()
    if (ref && reveal) this.reveal(ref, false)
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
    return this.frames.base?.traceStart ?? 0
  }

  /** The track list as arranged (pinned, hidden, order, collapsed: trackList.ts). */
  setTrackList(list: TrackList): void {
    if (list === this.trackList) return
    this.trackList = list
    this.relayout()
    this.requestDraw()
  }

  toggleGroup(key: string): void {
    this.changeTrackList(toggleCollapsed(this.trackList, key))
  }

  private changeTrackList(list: TrackList): void {
    this.setTrackList(list)
    this.cb.onTrackList(list)
  }

  requestDraw(): void {
    if (this.raf || this.destroyed) return
    this.raf = requestAnimationFrame(() => {
      this.raf = 0
      this.draw()
      this.publish()
    })
    this.publish()
  }

  // ------------------------------------------------------------------------------------------
  // InputHost (what input.ts reads and calls)

  get ready(): boolean {
    return this.frames.base !== null
  }

  get viewport(): Viewport {
    return makeViewport(this.view[0], this.view[1], GUTTER_W, this.w)
  }

  get height(): number {
    return this.h
  }

  get hasSelection(): boolean {
    return this.selected !== null
  }

  setView([start, end]: TimeWindow): void {
    const [s, e] = clampView(start, end, this.traceEnd)
    if (s === this.view[0] && e === this.view[1]) return
    this.view = [s, e]
    this.publish()
    this.requestDraw()
    this.scheduleFetch()
  }

  hitTest(x: number, y: number): Hit {
    return hitTest(this.frames, this.layout, this.viewport, this.top, x, y)
  }

  pick(ref: EventRef | null): void {
    this.select(ref)
    this.cb.onSelect(ref)
  }

  redraw(): void {
    this.requestDraw()
  }

  dragStarted(): void {
    this.tooltip.hide()
  }

  /** The range being dragged: its times (trace us) and the tracks whose rows it covers. */
  selectRange(x0: number, y0: number, x1: number, y1: number, allTracks: boolean, done: boolean): void {
    const v = this.viewport
    const start = Math.max(0, timeAt(v, Math.max(v.left, Math.min(x0, x1))))
    const end = timeAt(v, Math.max(v.left, Math.max(x0, x1)))
    const top = allTracks ? HEADER_H : Math.min(y0, y1)
    const bottom = allTracks ? this.h : Math.max(y0, y1)
    const tracks: number[] = []
    for (const item of this.layout.items) {
      const a = this.top + item.y
      if (a + item.h < top || a > bottom) continue
      if (item.type === 'track') tracks.push(item.track.id)
      else if (item.type === 'group' && item.collapsed) tracks.push(...item.trackIds)
    }
    this.range = end > start && tracks.length ? { start, end, y0: top, y1: bottom } : null
    this.requestDraw()
    if (done) this.cb.onRange(this.range ? { start: this.traceStartUs + start, end: this.traceStartUs + end, tracks: [...new Set(tracks)].sort((a, b) => a - b) } : null)
  }

  clearRange(): void {
    this.range = null
    this.requestDraw()
  }

  resize(): void {
    const { scroller, canvas } = this.els
    const w = scroller.clientWidth
    const h = scroller.clientHeight
    const dpr = window.devicePixelRatio || 1
    if (w === this.w && h === this.h && dpr === this.dpr) return
    const widthChanged = w !== this.w
    this.w = w
    this.h = h
    this.dpr = dpr
    this.painter.resize(canvas, w, h, dpr)
    this.updateSpacer()
    this.draw()
    if (widthChanged && this.frames.base) this.scheduleFetch()
  }

  // ------------------------------------------------------------------------------------------
  // Loading and layout

  private firstFrame(frame: Frame): void {
    this.frames = { base: frame, cur: frame }
    this.traceEnd = Math.max(frame.traceEnd, MIN_SPAN_US)
    this.counterMax = counterMaxima(this.frames.base, this.frames.cur)
    this.relayout()
    this.state = 'ready'
    this.view = [-1, -1] // not the fitted view: setView below must apply (and draw) it
    this.setView([0, this.traceEnd])
    this.loader.cancelScheduled() // the first frame already is the fitted view
    const crit = frame.critical
    if (crit && crit.step === this.critical) {
      // Opened from GPU Idle's "Show on Trace": zoom to the step, a margin on each side.
      const pad = Math.max((crit.end - crit.start) * 0.03, MIN_SPAN_US)
      this.setView([Math.max(0, crit.start - pad), crit.end + pad])
    }
    if (this.pendingWindow) this.showWindow(this.pendingWindow)
    this.publish()
    this.cb.onFirstFrame({ status: 'ok', frame })
  }

  private scheduleFetch(): void {
    this.loader.schedule(() => {
      const base = this.frames.base
      return base && !this.destroyed ? { viewport: this.viewport, traceEnd: this.traceEnd, traceStart: base.traceStart } : null
    })
  }

  private relayout(): void {
    const base = this.frames.base
    const tracks = (base?.tracks ?? []).filter(Boolean)
    const counters = (base?.counters ?? []).map((c) => ({ name: c.name, unit: c.unit, kind: c.kind }))
    this.layout = computeLayout(tracks, counters, this.trackList)
    this.publish()
    this.updateSpacer()
  }

  private updateSpacer(): void {
    const total = HEADER_H + this.layout.height + 8
    this.els.spacer.style.height = `${Math.max(0, total - this.h)}px`
  }

  /** Brings `ref` into view: the time window (viewport.ts), then its row (expand, scroll). */
  private reveal(ref: EventRef, zoom: boolean): void {
    const win = revealWindow(this.viewport, ref.start, ref.end, zoom)
    if (win) this.setView(win)
    if (this.trackList.hidden.includes(ref.track)) this.changeTrackList(toggleHidden(this.trackList, ref.track))
    const group = this.layout.groupOf.get(ref.track)
    if (group && this.trackList.collapsed.includes(group)) this.changeTrackList(expand(this.trackList, group))
    const scroller = this.els.scroller
    const scrollTop = rowScrollTop(this.layout, ref.track, ref.depth, scroller.scrollTop, this.h - HEADER_H)
    if (scrollTop !== null) scroller.scrollTop = scrollTop
  }

  // ------------------------------------------------------------------------------------------
  // Drawing

  /** Canvas y of the layout's y = 0. */
  private get top(): number {
    return HEADER_H - this.els.scroller.scrollTop
  }

  private draw(): void {
    if (this.destroyed) return
    const t0 = performance.now()
    const pointer = this.input.dragging ? null : this.input.pointer
    const hit = pointer ? this.hitTest(pointer.x, pointer.y) : null
    this.draws++
    const hover = hit?.type === 'event' ? refOf(hit) : null
    const { w, h, dpr, frames, layout, selected, related, flows, counterMax, range, critical } = this
    this.painter.paint({ w, h, dpr, viewport: this.viewport, frames, layout, top: this.top, selected, related, hover, pointer, flows, search: this.searchNames, counterMax, range, critical })
    this.probe?.recordSelectedFlows(this.painter.selectedFlows)
    this.probe?.recordCritical(critical, this.painter.criticalDrawn, this.painter.criticalEdges, frames.cur?.critical ?? null)
    this.probe?.recordClippedFlows(this.painter.clippedFlows)
    if (!this.frames.base || this.w <= GUTTER_W) return
    this.updateInfo()
    // The tooltip follows what is under the pointer now (a zoom or a new frame changes it too).
    const tip = pointer ? describe(hit, this.frames) : null
    if (tip && pointer) this.tooltip.show(tip, pointer, this.w, this.h)
    else if (!this.input.dragging) this.tooltip.hide()
    this.probe?.recordDraw(performance.now() - t0)
    this.publish()
  }

  private updateInfo(): void {
    const el = this.els.info
    const f = this.frames.cur
    if (!el || !f) return
    const text = fmtLoaded(f.stats)
    if (el.textContent !== text) el.textContent = text
  }

  /** The debug probe's data-* attributes (only when debugging is on: see debug.ts). */
  private publish(): void {
    if (!this.probe) return
    const { base, cur } = this.frames
    const frame = cur ? { start: cur.start, end: cur.end, events: cur.stats.events } : null
    const [viewStart, viewEnd] = this.view
    this.probe.publish({ state: this.state, viewStart, viewEnd, traceStart: base ? base.traceStart : null, traceEnd: base ? this.traceEnd : null, frame, loading: this.loading, scheduled: this.loader.scheduled, drawPending: this.raf !== 0, requests: this.loader.requests, selected: this.selected?.id ?? null, flows: this.flows.on, collapsed: this.trackList.collapsed.length, contentHeight: this.layout.height, draws: this.draws })
  }
}
