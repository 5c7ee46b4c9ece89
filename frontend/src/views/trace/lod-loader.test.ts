// The loader against an injected fetch function (the seam the view uses to pass the shared
// fetch path): requests are recorded and answered by hand; timers are vitest's fake timers.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { LoadingError } from '../../api'
import type { RawTimeline } from './api'
import type { Frame } from './frame'
import { DEBOUNCE_MS, LodLoader, MAX_WIDTH, type LodEvents, type TimelineWindow } from './lod-loader'
import { makeViewport } from './viewport'

interface Pending {
  window: TimelineWindow
  signal: AbortSignal
  resolve: (raw: RawTimeline) => void
  reject: (error: Error) => void
}

function timeline(startUs: number, endUs: number): RawTimeline {
  return {
    view: 'timeline', start_us: startUs, end_us: endUs, width: 100, us_per_px: 1, origin_us: startUs, trace_start_us: 1_000_000, trace_end_us: 1_010_000, merge_px: 1,
    names: [], tracks: [], steps: { total: 0, capped: false, name: [], start: [], end: [] },
    flows: { total: 0, capped: false, limit: 0, crossing: 0, cats: [], cat: [], from_track: [], from_depth: [], from_ts: [], from_id: [], to_track: [], to_depth: [], to_ts: [], to_id: [] },
    counters: [], stats: { events: 0, shown: 0, blocks: 0, hidden: 0 },
  }
}

function setup() {
  const sent: Pending[] = []
  const seen: { event: string; arg: unknown }[] = []
  const log = (event: string) => (arg: unknown) => seen.push({ event, arg })
  const events: LodEvents = { onPending: log('pending'), onFirst: log('first'), onFirstError: log('firstError'), onFrame: log('frame'), onFrameError: log('frameError'), onLoading: log('loading') }
  const fetchJson = (url: string, signal: AbortSignal) => new Promise<RawTimeline>((resolve, reject) => sent.push({ window: JSON.parse(url) as TimelineWindow, signal, resolve, reject }))
  const loader = new LodLoader(fetchJson, (w) => JSON.stringify(w), events)
  return { loader, sent, seen }
}

// A 1000 px track area over trace time 1000..2000 us of a 10 ms trace starting at 1e6 us.
const want = () => ({ viewport: makeViewport(1000, 2000, 0, 1000), traceEnd: 10_000, traceStart: 1_000_000 })

beforeEach(() => {
  vi.useFakeTimers()
})
afterEach(() => {
  vi.useRealTimers()
})

describe('first load', () => {
  it('asks for the whole trace at the canvas width, within 600..MAX_WIDTH px', () => {
    const a = setup()
    a.loader.loadFirst(300)
    const b = setup()
    b.loader.loadFirst(99_999)
    expect(a.sent[0].window).toEqual({ width: 600 })
    expect(b.sent[0].window).toEqual({ width: MAX_WIDTH })
  })

  it("retries after the server's Retry-After while it answers 202, reporting its progress", async () => {
    const { loader, sent, seen } = setup()
    loader.loadFirst(800)
    sent[0].reject(new LoadingError(0.4, 700))
    await vi.advanceTimersByTimeAsync(699)
    expect(sent).toHaveLength(1)
    expect(seen).toEqual([{ event: 'pending', arg: 0.4 }])
    await vi.advanceTimersByTimeAsync(1)
    expect(sent).toHaveLength(2)
    sent[1].resolve(timeline(1_000_000, 1_010_000))
    await vi.advanceTimersByTimeAsync(0)
    expect(seen.map((s) => s.event)).toEqual(['pending', 'first'])
    expect((seen[1].arg as Frame).end).toBe(10_000)
    expect(loader.requests).toBe(1)
  })

  it('reports other errors once, without retrying', async () => {
    const { loader, sent, seen } = setup()
    loader.loadFirst(800)
    sent[0].reject(new Error('boom'))
    await vi.advanceTimersByTimeAsync(5000)
    expect(sent).toHaveLength(1)
    expect(seen.map((s) => s.event)).toEqual(['firstError'])
  })
})

describe('window requests', () => {
  it('waits until the view rests, then asks for the view plus half a view each side', async () => {
    const { loader, sent, seen } = setup()
    for (let i = 0; i < 5; i++) {
      loader.schedule(want)
      await vi.advanceTimersByTimeAsync(DEBOUNCE_MS - 1)
    }
    expect(sent).toHaveLength(0)
    await vi.advanceTimersByTimeAsync(1)
    // 500..2500 us trace time, absolute 1e6 + that, at 1 us/px.
    expect(sent.map((p) => p.window)).toEqual([{ start: 1_000_500, end: 1_002_500, width: 2000 }])
    expect(seen).toEqual([{ event: 'loading', arg: true }])
    sent[0].resolve(timeline(1_000_500, 1_002_500))
    await vi.advanceTimersByTimeAsync(0)
    // The frame is in before "not loading" is said.
    expect(seen.map((s) => s.event)).toEqual(['loading', 'frame', 'loading'])
    expect(seen[2].arg).toBe(false)
    expect((seen[1].arg as Frame).start).toBe(500)
  })

  it('does not ask twice for the same window, nor after cancelScheduled', async () => {
    const { loader, sent } = setup()
    loader.schedule(want)
    await vi.advanceTimersByTimeAsync(DEBOUNCE_MS)
    loader.schedule(want)
    await vi.advanceTimersByTimeAsync(DEBOUNCE_MS)
    loader.schedule(() => ({ ...want(), viewport: makeViewport(3000, 4000, 0, 1000) }))
    loader.cancelScheduled()
    await vi.advanceTimersByTimeAsync(DEBOUNCE_MS)
    expect(sent).toHaveLength(1)
    expect(loader.requests).toBe(1)
  })

  it('says a request is scheduled from schedule() until its debounce timer ran, not a tick longer', async () => {
    const { loader } = setup()
    expect(loader.scheduled).toBe(false)
    loader.schedule(want)
    expect(loader.scheduled).toBe(true)
    await vi.advanceTimersByTimeAsync(DEBOUNCE_MS - 1)
    expect(loader.scheduled).toBe(true)
    await vi.advanceTimersByTimeAsync(1)
    expect(loader.scheduled).toBe(false)
    loader.schedule(want)
    loader.cancelScheduled()
    expect(loader.scheduled).toBe(false)
  })

  it('aborts the older request when a newer one starts and ignores its late answer', async () => {
    const { loader, sent, seen } = setup()
    loader.schedule(want)
    await vi.advanceTimersByTimeAsync(DEBOUNCE_MS)
    loader.schedule(() => ({ ...want(), viewport: makeViewport(5000, 6000, 0, 1000) }))
    await vi.advanceTimersByTimeAsync(DEBOUNCE_MS)
    expect(sent).toHaveLength(2)
    expect(sent[0].signal.aborted).toBe(true)
    expect(sent[1].signal.aborted).toBe(false)
    sent[0].resolve(timeline(1_000_500, 1_002_500))
    await vi.advanceTimersByTimeAsync(0)
    expect(seen.filter((s) => s.event === 'frame')).toHaveLength(0)
  })

  it("retries a 202 after its Retry-After, and after an error asks for the same window again", async () => {
    const { loader, sent, seen } = setup()
    loader.schedule(want)
    await vi.advanceTimersByTimeAsync(DEBOUNCE_MS)
    sent[0].reject(new LoadingError(0, 1000))
    await vi.advanceTimersByTimeAsync(999)
    expect(sent).toHaveLength(1)
    await vi.advanceTimersByTimeAsync(1)
    expect(sent).toHaveLength(2)
    expect(sent[1].window).toEqual(sent[0].window)
    sent[1].reject(new Error('500 Internal Server Error'))
    await vi.advanceTimersByTimeAsync(0)
    expect(seen.map((s) => s.event)).toEqual(['loading', 'loading', 'frameError'])
    loader.schedule(want)
    await vi.advanceTimersByTimeAsync(DEBOUNCE_MS)
    expect(sent).toHaveLength(3)
  })

  it('fetches nothing for a view entirely outside the trace', async () => {
    const { loader, sent } = setup()
    loader.schedule(() => ({ ...want(), viewport: makeViewport(-100, -50, 0, 1000) }))
    await vi.advanceTimersByTimeAsync(DEBOUNCE_MS)
    expect(sent).toHaveLength(0)
  })

  it('sends nothing once destroyed', async () => {
    const { loader, sent } = setup()
    loader.schedule(want)
    loader.destroy()
    await vi.advanceTimersByTimeAsync(DEBOUNCE_MS)
    expect(sent).toHaveLength(0)
  })
})
