import { describe, expect, it } from 'vitest'
import type { RawTimeline } from './api'
import { counterMaxima, decodeFrame, firstAtOrAfter, lastAtOrBefore } from './frame'
import { PALETTE_SIZE } from './palette'

// Absolute times: the trace starts at 1e6 us; this payload's lists are relative to its origin
// 1e6 + 100, so every trace time below is the list value + 100.
function raw(): RawTimeline {
  return {
    view: 'timeline',
    start_us: 1_000_100,
    end_us: 1_002_000,
    width: 950,
    us_per_px: 2,
    origin_us: 1_000_100,
    trace_start_us: 1_000_000,
    trace_end_us: 1_003_000,
    merge_px: 1,
    names: ['aten::mm', 'ProfilerStep#1', 'ProfilerStep#2'],
    tracks: [
      {
        id: 0, pid: '1', tid: '2', kind: 'cpu', process: 'python', thread: 'main', depth: 0, event_count: 3,
        rows: [{ depth: 0, events: { name: [1, 0], start: [0, 50], dur: [10, 5], id: [7, 8] }, blocks: { start: [20], end: [40], count: [12] } }],
      },
    ],
    steps: { total: 2, capped: false, name: ['1', '2'], start: [0, 500], end: [500, 900] },
    flows: { total: 1, capped: false, limit: 100, crossing: 0, cats: ['ac2g'], cat: [0], from_track: [0], from_depth: [0], from_ts: [1], from_id: [7], to_track: [0], to_depth: [0], to_ts: [60], to_id: [8] },
    counters: [{ name: 'mem', kind: 'memory_allocated', device: 'cpu', unit: 'bytes', t: [0, 30], v: [5, 9] }],
    stats: { events: 3, shown: 2, blocks: 1, hidden: 12 },
  }
}

describe('decodeFrame', () => {
  const f = decodeFrame(raw())

  it('puts every time in trace time (us from the first event)', () => {
    expect(f.traceStart).toBe(1_000_000)
    expect(f.start).toBe(100)
    expect(f.end).toBe(2000)
    expect(f.traceEnd).toBe(3000)
    const row = f.rows[0][0]
    expect(Array.from(row?.evStart ?? [])).toEqual([100, 150])
    expect(Array.from(row?.evEnd ?? [])).toEqual([110, 155]) // start + dur
    expect(Array.from(row?.blStart ?? [])).toEqual([120])
    expect(Array.from(row?.blEnd ?? [])).toEqual([140])
    expect(Array.from(f.steps.start)).toEqual([100, 600])
    expect(Array.from(f.flows.fromT)).toEqual([101])
    expect(Array.from(f.flows.toT)).toEqual([160])
    expect(Array.from(f.counters[0].t)).toEqual([100, 130])
  })

  it('keeps ids, names, counts and values as they are (no offset)', () => {
    const row = f.rows[0][0]
    expect(Array.from(row?.evId ?? [])).toEqual([7, 8])
    expect(Array.from(row?.evName ?? [])).toEqual([1, 0])
    expect(Array.from(row?.blCount ?? [])).toEqual([12])
    expect(Array.from(f.counters[0].v)).toEqual([5, 9])
    expect(f.counters[0].max).toBe(9)
    expect(f.flows.count).toBe(1)
    expect(f.stats.hidden).toBe(12)
  })

  it('gives a track at least one row and strips the rows off its info', () => {
    expect(f.tracks[0].depth).toBe(1)
    expect('rows' in f.tracks[0]).toBe(false)
  })

  it('colors step markers alike whatever their number', () => {
    expect(f.nameColor[1]).toBe(f.nameColor[2])
    for (const c of f.nameColor) expect(c >= 0 && c < PALETTE_SIZE).toBe(true)
  })
})

describe('counterMaxima', () => {
  it('takes the largest value of each counter over the frames, skipping null', () => {
    const a = decodeFrame(raw())
    const b = decodeFrame({ ...raw(), counters: [{ name: 'mem', kind: 'memory_allocated', device: 'd', unit: 'bytes', t: [0], v: [4] }, { name: 'util', kind: 'gpu_utilization', device: 'd', unit: 'fraction', t: [0], v: [0.5] }] })
    expect(Object.fromEntries(counterMaxima(a, null, b))).toEqual({ mem: 9, util: 0.5 })
  })
})

describe('binary searches', () => {
  const sorted = Float64Array.from([1, 3, 3, 5])

  it('lastAtOrBefore: the last index <= x, -1 when none', () => {
    expect(lastAtOrBefore(sorted, 0)).toBe(-1)
    expect(lastAtOrBefore(sorted, 1)).toBe(0)
    expect(lastAtOrBefore(sorted, 3)).toBe(2)
    expect(lastAtOrBefore(sorted, 4)).toBe(2)
    expect(lastAtOrBefore(sorted, 10)).toBe(3)
  })

  it('firstAtOrAfter: the first index >= x, length when none', () => {
    expect(firstAtOrAfter(sorted, 0)).toBe(0)
    expect(firstAtOrAfter(sorted, 3)).toBe(1)
    expect(firstAtOrAfter(sorted, 4)).toBe(3)
    expect(firstAtOrAfter(sorted, 6)).toBe(4)
    expect(firstAtOrAfter(new Float64Array(0), 1)).toBe(0)
  })
})
