// The Trace view's viewport: which window of time the canvas shows and where it is drawn. Pure
// maths (no DOM), unit-tested in viewport.test.ts.
//
// Coordinate spaces, named so no value crosses from one to another unnoticed:
//  - trace time (us): microseconds from the trace's first event; the view window lives here;
//  - absolute time (us): trace time + the frame's traceStart; only the server's URLs use it;
//  - canvas x (CSS px): from the canvas' left edge; the track area starts at `left` (right of
//    the track names) and is `width` px wide.

export const MIN_SPAN_US = 0.05

/** The visible window [start, end] (trace time) drawn over canvas x in [left, left + width]. */
export interface Viewport {
  readonly start: number
  readonly end: number
  readonly left: number
  readonly width: number
}

/** A view window, trace time (us). */
export type TimeWindow = readonly [start: number, end: number]

export function makeViewport(start: number, end: number, left: number, canvasWidth: number): Viewport {
  // At least one px wide: a canvas narrower than the gutter must not divide by zero.
  return { start, end, left, width: Math.max(1, canvasWidth - left) }
}

export function spanOf(v: Viewport): number {
  return v.end - v.start
}

/** Canvas x of trace time t. */
export function xAt(v: Viewport, t: number): number {
  return v.left + ((t - v.start) / (v.end - v.start)) * v.width
}

/** Trace time at canvas x. */
export function timeAt(v: Viewport, x: number): number {
  return v.start + ((x - v.left) / v.width) * (v.end - v.start)
}

export function usPerPx(v: Viewport): number {
  return (v.end - v.start) / v.width
}

/**
 * The window [start, end] made valid for a trace of `traceEnd` us:
 * - at least MIN_SPAN_US wide: below that, float64 trace times (up to ~1e10 us for hours-long
 *   traces) no longer give distinct pixels, and the ruler's ticks would collapse;
 * - at most the trace plus a 5 % margin on each side: zooming out further shows only empty
 *   space, and the margin lets the first and last events be seen off the canvas' edges;
 * - shifted (not shrunk) to stay inside [-margin, full + margin], so a pan that hits an edge
 *   keeps the zoom level instead of squeezing the window;
 * - NaN/Infinity (a zero-width canvas, a wild wheel delta) fall back to the whole trace.
 */
export function clampView(start: number, end: number, traceEnd: number): TimeWindow {
  const full = Math.max(traceEnd, MIN_SPAN_US)
  const margin = full * 0.05
  let span = Math.min(Math.max(end - start, MIN_SPAN_US), full + 2 * margin)
  if (!Number.isFinite(span)) span = full
  let s = Number.isFinite(start) ? start : 0
  if (s < -margin) s = -margin
  if (s + span > full + margin) s = full + margin - span
  return [s, s + span]
}

/** The window moved by `dx` canvas px (positive: later times come into view). */
export function panByPx(v: Viewport, dx: number): TimeWindow {
  const shift = (dx / v.width) * spanOf(v)
  return [v.start + shift, v.end + shift]
}

/** The window scaled by `factor` (< 1 zooms in) keeping the time under canvas x `anchorX` put. */
export function zoomAround(v: Viewport, anchorX: number, factor: number): TimeWindow {
  const at = timeAt(v, anchorX)
  const newSpan = spanOf(v) * factor
  const frac = (anchorX - v.left) / v.width
  return [at - frac * newSpan, at + (1 - frac) * newSpan]
}

/** The window scaled by `factor` around its middle (the toolbar's +/- buttons). */
export function zoomCentered(v: Viewport, factor: number): TimeWindow {
  const mid = (v.start + v.end) / 2
  const span = spanOf(v) * factor
  return [mid - span / 2, mid + span / 2]
}

/**
 * The zoom factor of a vertical wheel delta (px). Pinch-zoom gestures arrive as ctrl+wheel with
 * small deltas, so they get a steeper slope; one event never zooms by more than e^3 (about 20x),
 * whatever a free-spinning wheel reports.
 */
export function wheelZoomFactor(dy: number, ctrlKey: boolean): number {
  const k = ctrlKey ? 0.01 : 0.0022
  return Math.exp(Math.max(-3, Math.min(3, dy * k)))
}

/** A merged block [start, end] zoomed to with 15 % padding, so its events separate. */
export function blockWindow(start: number, end: number): TimeWindow {
  const pad = (end - start) * 0.15 + MIN_SPAN_US
  return [start - pad, end + pad]
}

/**
 * The window that brings the event [start, end] into view, or null when the view already shows
 * it well. `zoom` (the F key) fits it to 60 % of the width; an event wider than 80 % of the view
 * is zoomed out to; one narrower than 24 px is zoomed in to (room for its label).
 */
export function revealWindow(v: Viewport, start: number, end: number, zoom: boolean): TimeWindow | null {
  const span = spanOf(v)
  const dur = Math.max(0, end - start)
  let newSpan = span
  if (dur > span * 0.8 || zoom) newSpan = Math.max(dur / 0.6, MIN_SPAN_US * 20)
  else if ((dur / span) * v.width < 24) newSpan = Math.min(span, Math.max(dur * 8, 20))
  const inView = start >= v.start && end <= v.end
  if (newSpan === span && inView) return null
  const mid = (start + end) / 2
  return [mid - newSpan / 2, mid + newSpan / 2]
}

/**
 * The window to fetch for the view: `overscan` views' worth more on each side (so short pans
 * show data at once), cut to the trace, at the view's resolution (px per us), at most
 * `maxWidth` px. Null when nothing of the trace is in view.
 */
export function fetchWindow(v: Viewport, traceEnd: number, overscan: number, maxWidth: number): { lo: number; hi: number; width: number } | null {
  const span = spanOf(v)
  const lo = Math.max(v.start - overscan * span, 0)
  const hi = Math.min(v.end + overscan * span, traceEnd)
  if (!(hi > lo)) return null
  const width = Math.min(maxWidth, Math.max(1, Math.round((v.width * (hi - lo)) / span)))
  return { lo, hi, width }
}
