// Level-of-detail loading of the Trace view: the whole trace once, then the visible window at the
// canvas' resolution, 60 ms after the view last changed (debounce), with half a window of
// overscan on each side so short pans show data at once. A newer request aborts the older one.
//
// The loader knows nothing of HTTP: it builds URLs with `url` and calls the injected `fetchJson`
// (the view passes the shared api/http.ts path, which sends one request and turns a 202 into
// LoadingError). While the server still parses the trace it answers 202; the loader is the
// Trace view's one 202-retry path: it asks again after the server's Retry-After, for the first
// load and for later windows alike.

import { LoadingError } from '../../api'
import type { RawTimeline } from './api'
import { decodeFrame, type Frame } from './frame'
import { fetchWindow, type Viewport } from './viewport'

/** Fetches and parses one JSON document; rejects with an AbortError when `signal` aborts. */
export type FetchJson<T> = (url: string, signal: AbortSignal) => Promise<T>

/** A timeline request, absolute us (undefined: the whole trace) at `width` px. */
export interface TimelineWindow {
  start?: number
  end?: number
  width: number
}

export interface LodEvents {
  /** The server is still loading the trace (202); `progress` in [0, 1] when it says. */
  onPending: (progress: number | null) => void
  onFirst: (frame: Frame) => void
  onFirstError: (error: Error) => void
  onFrame: (frame: Frame) => void
  onFrameError: (error: Error) => void
  /** A window request started (true) or settled (false). */
  onLoading: (on: boolean) => void
  /** A debounced window request was scheduled (true) or its timer ran (false). */
  onScheduled?: (on: boolean) => void
}

export const DEBOUNCE_MS = 60
export const OVERSCAN = 0.5
export const MAX_WIDTH = 16384

export class LodLoader {
  private timer: ReturnType<typeof setTimeout> | undefined = undefined
  private inflight: AbortController | null = null
  private lastKey = ''
  private destroyed = false
  /** Requests sent (the first load counts once it succeeds), for the debug probe. */
  requests = 0
  /** A window request waits for its debounce timer. */
  scheduled = false
  private readonly fetchJson: FetchJson<RawTimeline>
  private readonly url: (window: TimelineWindow) => string
  private readonly events: LodEvents

  /** `url` builds a request's URL; `fetchJson` fetches it (the view's shared fetch path). */
  constructor(fetchJson: FetchJson<RawTimeline>, url: (window: TimelineWindow) => string, events: LodEvents) {
    this.fetchJson = fetchJson
    this.url = url
    this.events = events
  }

  destroy(): void {
    this.destroyed = true
    this.inflight?.abort()
    clearTimeout(this.timer)
    this.scheduled = false
  }

  /** The whole trace at `width` px; retried while the server answers 202. */
  loadFirst(width: number): void {
    const controller = new AbortController()
    this.inflight = controller
    this.attempt(this.url({ width: Math.min(MAX_WIDTH, Math.max(width, 600)) }), controller, {
      ok: (frame) => {
        this.inflight = null
        this.lastKey = ''
        this.requests++
        this.events.onFirst(frame)
      },
      fail: (error) => this.events.onFirstError(error),
      pending: (progress) => this.events.onPending(progress),
    })
  }

  /** Fetch what `want()` returns once the view has rested for DEBOUNCE_MS. */
  schedule(want: () => { viewport: Viewport; traceEnd: number; traceStart: number } | null): void {
    clearTimeout(this.timer)
    this.scheduled = true
    this.events.onScheduled?.(true)
    this.timer = setTimeout(() => {
      this.scheduled = false
      const w = want()
      if (w) this.fetchView(w.viewport, w.traceEnd, w.traceStart)
      this.events.onScheduled?.(false)
    }, DEBOUNCE_MS)
  }

  /** Forgets the last window, so the same window is asked for again (new request options). */
  invalidate(): void {
    this.lastKey = ''
  }

  /** Drops a scheduled (not yet sent) request. */
  cancelScheduled(): void {
    clearTimeout(this.timer)
    this.scheduled = false
    this.events.onScheduled?.(false)
  }

  private fetchView(v: Viewport, traceEnd: number, traceStart: number): void {
    if (this.destroyed) return
    const win = fetchWindow(v, traceEnd, OVERSCAN, MAX_WIDTH)
    if (!win) return
    const start = traceStart + win.lo
    const end = traceStart + win.hi
    const key = `${start.toFixed(3)}|${end.toFixed(3)}|${win.width}`
    if (key === this.lastKey) return
    this.lastKey = key
    this.inflight?.abort()
    const controller = new AbortController()
    this.inflight = controller
    this.requests++
    this.events.onLoading(true)
    this.attempt(this.url({ start, end, width: win.width }), controller, {
      ok: (frame) => {
        this.inflight = null
        this.events.onFrame(frame) // before onLoading(false): "not loading" means this frame is in
        this.events.onLoading(false)
      },
      fail: (error) => {
        this.inflight = null
        this.lastKey = '' // the same window may be asked for again
        this.events.onLoading(false)
        this.events.onFrameError(error)
      },
    })
  }

  /** One request, asked again after the server's Retry-After while it fails with LoadingError (202). */
  private attempt(url: string, controller: AbortController, then: { ok: (frame: Frame) => void; fail: (error: Error) => void; pending?: (progress: number | null) => void }): void {
    const signal = controller.signal
    if (this.destroyed || signal.aborted) return
    this.fetchJson(url, signal).then(
      (raw) => {
        if (this.destroyed || signal.aborted) return
        then.ok(decodeFrame(raw))
      },
      (error: Error) => {
        if (this.destroyed || signal.aborted || error.name === 'AbortError') return
        if (error instanceof LoadingError) {
          then.pending?.(error.progress)
          setTimeout(() => this.attempt(url, controller, then), error.retryAfterMs)
          return
        }
        then.fail(error)
      },
    )
  }
}
