// The Trace view's debug probe: the engine's state (view window, loaded frame, request count,
// draw count and cost) written as data-* attributes of the canvas root, where browser tests and
// benchmarks read it. Off unless the page sets `window.__TORCH_PROF_DEBUG__ = true` before the
// bundle runs (tests/ui/test_trace_view.py does, with an init script); normal use writes nothing.

declare global {
  interface Window {
    __TORCH_PROF_DEBUG__?: boolean
  }
}

export function debugEnabled(): boolean {
  return typeof window !== 'undefined' && window.__TORCH_PROF_DEBUG__ === true
}

export interface ProbeState {
  state: 'loading' | 'ready' | 'error'
  viewStart: number
  viewEnd: number
  traceStart: number | null
  traceEnd: number | null
  frame: { start: number; end: number; events: number } | null
  loading: boolean
  /** A window request waits for its debounce timer (`data-scheduled`). */
  scheduled: boolean
  /** A draw is requested and not yet done (`data-draw-pending`). */
  drawPending: boolean
  requests: number
  selected: number | null
  flows: boolean
  collapsed: number
  contentHeight: number
  draws: number
}

export class DebugProbe {
  /** Recent draw durations (ms). */
  private readonly drawMs: number[] = []
  private readonly root: HTMLElement

  constructor(root: HTMLElement) {
    this.root = root
  }

  /** Flows of the selected event drawn by the last frame (`data-selected-flows`). */
  recordSelectedFlows(count: number): void {
    this.root.dataset.selectedFlows = String(count)
  }

  /** The critical-path highlight of the last frame: `data-critical-step`, `-drawn` (path events
   * and blocks outlined), `-edges` (arrows drawn), `-marked` (path events the frame lists),
   * `-nodes` (events on the whole path). */
  recordCritical(step: string | null, drawn: number, edges: number, frame: { nodes: number; marked: number; markedBlocks: number } | null): void {
    const d = this.root.dataset
    d.criticalStep = step ?? ''
    d.criticalDrawn = String(step ? drawn : 0)
    d.criticalEdges = String(step ? edges : 0)
    d.criticalMarked = String(step && frame ? frame.marked + frame.markedBlocks : 0)
    d.criticalNodes = String(step && frame ? frame.nodes : 0)
  }

  /** Flows drawn clipped at the screen's edge by the last frame (`data-clipped-flows`). */
  recordClippedFlows(count: number): void {
    this.root.dataset.clippedFlows = String(count)
  }

  recordDraw(ms: number): void {
    this.drawMs.push(ms)
    if (this.drawMs.length > 120) this.drawMs.shift()
  }

  publish(s: ProbeState): void {
    const d = this.root.dataset
    d.state = s.state
    d.viewStart = s.viewStart.toFixed(3)
    d.viewEnd = s.viewEnd.toFixed(3)
    if (s.traceStart !== null) d.traceStart = String(s.traceStart)
    if (s.traceEnd !== null) d.traceEnd = String(s.traceEnd)
    if (s.frame) {
      d.frameStart = s.frame.start.toFixed(3)
      d.frameEnd = s.frame.end.toFixed(3)
      d.frameEvents = String(s.frame.events)
    }
    d.loading = s.loading ? '1' : ''
    d.scheduled = s.scheduled ? '1' : ''
    d.drawPending = s.drawPending ? '1' : ''
    d.requests = String(s.requests)
    d.selected = s.selected === null ? '' : String(s.selected)
    d.flows = s.flows ? 'on' : 'off'
    d.collapsed = String(s.collapsed)
    d.contentHeight = String(s.contentHeight)
    d.draws = String(s.draws)
    d.drawMs = this.drawStats()
  }

  /** "avg/max" of the recent draws, ms. */
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
}
