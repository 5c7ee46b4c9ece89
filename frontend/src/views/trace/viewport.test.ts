// Expected values are derived by hand from the definitions (see each comment), not by calling
// the code under test a second way.
import { describe, expect, it } from 'vitest'
import { MIN_SPAN_US, blockWindow, clampView, fetchWindow, makeViewport, panByPx, revealWindow, spanOf, timeAt, usPerPx, wheelZoomFactor, xAt, zoomAround, zoomCentered } from './viewport'

// A 1000 px track area over 0..2000 us: 2 us per px.
const v = makeViewport(0, 2000, 0, 1000)

describe('transforms', () => {
  it('maps time to x and back on a 1000 px viewport over 0..2000 us', () => {
    expect(usPerPx(v)).toBe(2)
    expect(xAt(v, 500)).toBe(250)
    expect(xAt(v, 2000)).toBe(1000)
    expect(timeAt(v, 250)).toBe(500)
    expect(timeAt(v, 0)).toBe(0)
  })

  it('counts x from the canvas edge: the track area starts at `left`', () => {
    // 1232 px canvas with a 232 px gutter: the same 1000 px track area, shifted.
    const g = makeViewport(0, 2000, 232, 1232)
    expect(g.width).toBe(1000)
    expect(xAt(g, 500)).toBe(482)
    expect(timeAt(g, 232)).toBe(0)
    expect(timeAt(g, 482)).toBe(500)
  })

  it('keeps the track area at least 1 px wide on a canvas narrower than the gutter', () => {
    expect(makeViewport(0, 10, 232, 100).width).toBe(1)
  })
})

describe('clampView', () => {
  // traceEnd 1000 us: margin 5 % = 50 us, so the window lives in [-50, 1050], at most 1100 wide.
  it('leaves a window inside the trace alone', () => {
    expect(clampView(100, 300, 1000)).toEqual([100, 300])
  })

  it('widens a window below the minimum span', () => {
    const [s, e] = clampView(100, 50, 1000)
    expect(s).toBe(100)
    expect(e - s).toBeCloseTo(MIN_SPAN_US, 12)
  })

  it('shifts, not shrinks, a window past either edge', () => {
    expect(clampView(-500, 500, 1000)).toEqual([-50, 950])
    expect(clampView(900, 1100, 1000)).toEqual([850, 1050])
  })

  it('caps the span at the trace plus both margins', () => {
    expect(clampView(0, 5000, 1000)).toEqual([-50, 1050])
  })

  it('falls back to the whole trace for NaN', () => {
    expect(clampView(Number.NaN, 10, 1000)).toEqual([0, 1000])
  })

  it('treats an empty trace as MIN_SPAN_US long', () => {
    const [s, e] = clampView(0, 100, 0)
    // full = 0.05, margin = 0.0025: span capped at 0.055, start shifted to -0.0025.
    expect(s).toBeCloseTo(-0.0025, 12)
    expect(e).toBeCloseTo(0.0525, 12)
  })
})

describe('zoom and pan', () => {
  it('pans by pixels at the view scale', () => {
    expect(panByPx(v, 100)).toEqual([200, 2200]) // 100 px x 2 us/px
    expect(panByPx(v, -50)).toEqual([-100, 1900])
  })

  it('zooms around the pointer, keeping the time under it put', () => {
    // Anchor x = 250 is t = 500, a quarter in; span 2000 -> 1000 keeps t = 500 a quarter in.
    const [s, e] = zoomAround(v, 250, 0.5)
    expect([s, e]).toEqual([250, 1250])
    expect(xAt(makeViewport(s, e, 0, 1000), 500)).toBe(250)
  })

  it('zooms around the middle for the toolbar buttons', () => {
    expect(zoomCentered(v, 2)).toEqual([-1000, 3000])
    expect(zoomCentered(v, 0.5)).toEqual([500, 1500])
  })

  it('turns wheel deltas into bounded zoom factors', () => {
    expect(wheelZoomFactor(100, false)).toBeCloseTo(Math.exp(0.22), 12)
    expect(wheelZoomFactor(100, true)).toBeCloseTo(Math.E, 12) // pinch: 0.01 per px
    expect(wheelZoomFactor(-1e6, false)).toBeCloseTo(Math.exp(-3), 12)
    expect(wheelZoomFactor(1e6, true)).toBeCloseTo(Math.exp(3), 12)
  })

  it('zooms to a merged block with 15 % padding', () => {
    const [s, e] = blockWindow(100, 200)
    expect(s).toBeCloseTo(84.95, 9) // 100 - (15 + 0.05)
    expect(e).toBeCloseTo(215.05, 9)
  })

  it('spans', () => {
    expect(spanOf(v)).toBe(2000)
  })
})

describe('revealWindow', () => {
  it('leaves a visible, wide enough event alone', () => {
    expect(revealWindow(v, 500, 600, false)).toBeNull() // 50 px wide
  })

  it('centres an event out of view at the same zoom', () => {
    expect(revealWindow(v, 3000, 3100, false)).toEqual([2050, 4050])
  })

  it('zooms in on an event too narrow for its label', () => {
    // 10 us = 5 px < 24 px: span = max(8 x 10, 20) = 80 around its middle 505.
    expect(revealWindow(v, 500, 510, false)).toEqual([465, 545])
    // 1 us: 8 x 1 < 20, so at least 20 us around 500.5.
    expect(revealWindow(v, 500, 501, false)).toEqual([490.5, 510.5])
  })

  it('zooms out to an event wider than 80 % of the view', () => {
    // dur 1800 > 1600: span = 1800 / 0.6 = 3000 around 900.
    const [s, e] = revealWindow(v, 0, 1800, false) ?? [Number.NaN, Number.NaN]
    expect(s).toBeCloseTo(-600, 9)
    expect(e).toBeCloseTo(2400, 9)
  })

  it('fits the event to 60 % of the width when asked to zoom (F)', () => {
    const [s, e] = revealWindow(v, 500, 600, true) ?? [Number.NaN, Number.NaN]
    expect(e - s).toBeCloseTo(100 / 0.6, 9)
    expect((s + e) / 2).toBeCloseTo(550, 9)
  })
})

describe('fetchWindow', () => {
  it('adds half a view on each side at the view resolution', () => {
    // 1000..2000 over 1000 px: 500..2500 at 1 us/px = 2000 px.
    expect(fetchWindow(makeViewport(1000, 2000, 0, 1000), 10_000, 0.5, 16384)).toEqual({ lo: 500, hi: 2500, width: 2000 })
  })

  it('cuts the overscan at the trace edges', () => {
    expect(fetchWindow(makeViewport(0, 1000, 0, 1000), 1200, 0.5, 16384)).toEqual({ lo: 0, hi: 1200, width: 1200 })
  })

  it('caps the width', () => {
    expect(fetchWindow(makeViewport(1000, 2000, 0, 1000), 10_000, 0.5, 1500)).toEqual({ lo: 500, hi: 2500, width: 1500 })
  })

  it('fetches nothing for a view entirely before the trace', () => {
    expect(fetchWindow(makeViewport(-100, -50, 0, 1000), 1000, 0.5, 16384)).toBeNull()
  })
})
