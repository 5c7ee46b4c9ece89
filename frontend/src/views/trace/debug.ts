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
