// A `timeline` payload decoded into typed arrays, in *trace time*: microseconds from the trace's
// first event (trace_start_us). The payload's lists are relative to its own origin_us; adding the
// origin's offset once here keeps every later computation on small numbers (absolute times of
// 1.7e15 us only have ~0.25 us of float64 precision).

import type { RawTimeline, TrackInfo } from './api'
import { colorIndex } from './palette'

export interface RowData {
  /** Single events, sorted by start, disjoint. */
  evStart: Float64Array
  evEnd: Float64Array
  evName: Int32Array
  evId: Float64Array
  /** Merged runs of sub-pixel events ("blocks"), sorted, disjoint. */
  blStart: Float64Array
  blEnd: Float64Array
  blCount: Float64Array
  /** With a critical step (`critical_step`): 1 for events / blocks holding path events. */
  evPath: Uint8Array
  blPath: Uint8Array
}

/** The critical path of one step (`critical` of the payload), trace time. */
export interface CriticalData {
  step: string
  start: number
  end: number
  nodes: number
  /** Edges touching the window, in path order. */
  count: number
  kinds: string[]
  kind: Int32Array
  fromTrack: Int32Array
  fromDepth: Int32Array
  fromT: Float64Array
  toTrack: Int32Array
  toDepth: Int32Array
  toT: Float64Array
  /** Path events drawn one by one in this frame (marked events of every row). */
  marked: number
  markedBlocks: number
}

export interface CounterData {
  name: string
  kind: string
  device: string
  unit: string
  /** Step function: value v[i] holds from t[i] to t[i + 1] (the last one to the frame end). */
  t: Float64Array
  v: Float64Array
  max: number
}

export interface FlowData {
  cats: string[]
  count: number
  cat: Int32Array
  fromTrack: Int32Array
  fromDepth: Int32Array
  fromT: Float64Array
  fromId: Float64Array
  toTrack: Int32Array
  toDepth: Int32Array
  toT: Float64Array
  toId: Float64Array
  total: number
  capped: boolean
  crossing: number
}

export interface StepData {
  name: string[]
  start: Float64Array
  end: Float64Array
  capped: boolean
}

export interface Frame {
  /** Requested window, trace time (us). */
  start: number
  end: number
  width: number
  usPerPx: number
  mergePx: number
  traceStart: number // absolute us of trace time 0
  traceEnd: number // trace time of the last event end
  names: string[]
  /** Palette index per name code. */
  nameColor: Int32Array
  tracks: TrackInfo[]
  /** rows[trackId][depth], undefined where nothing is visible. */
  rows: (RowData | undefined)[][]
  steps: StepData
  flows: FlowData
  counters: CounterData[]
  stats: { events: number; shown: number; blocks: number; hidden: number }
  /** Present when the frame was asked for with a critical step. */
  critical: CriticalData | null
}

const marks = (n: number, idx: number[] | undefined): Uint8Array => {
  const out = new Uint8Array(n)
  for (const i of idx ?? []) if (i >= 0 && i < n) out[i] = 1
  return out
}

const f64 = (values: number[] | undefined, offset = 0): Float64Array => {
  const out = new Float64Array(values?.length ?? 0)
  if (values) for (let i = 0; i < values.length; i++) out[i] = values[i] + offset
  return out
}

const i32 = (values: number[] | undefined): Int32Array => Int32Array.from(values ?? [])

export function decodeFrame(raw: RawTimeline): Frame {
  const traceStart = raw.trace_start_us
  const offset = raw.origin_us - traceStart
  const names = Array.isArray(raw.names) ? raw.names.map(String) : []
  const nameColor = new Int32Array(names.length)
  for (let i = 0; i < names.length; i++) nameColor[i] = colorIndex(names[i])

  const tracks: TrackInfo[] = []
  const rows: (RowData | undefined)[][] = []
  let marked = 0
  let markedBlocks = 0
  for (const t of raw.tracks ?? []) {
    const { rows: rawRows, ...info } = t
    const depth = Math.max(1, info.depth | 0)
    tracks[info.id] = { ...info, depth }
    const list: (RowData | undefined)[] = new Array(depth)
    for (const r of rawRows ?? []) {
      const evStart = f64(r.events.start, offset)
      const evEnd = new Float64Array(evStart.length)
      for (let i = 0; i < evStart.length; i++) evEnd[i] = evStart[i] + (r.events.dur[i] ?? 0)
      list[r.depth] = {
        evStart,
        evEnd,
        evName: i32(r.events.name),
        evId: f64(r.events.id),
        blStart: f64(r.blocks.start, offset),
        blEnd: f64(r.blocks.end, offset),
        blCount: f64(r.blocks.count),
        evPath: marks(evStart.length, r.events.path),
        blPath: marks(r.blocks.start.length, r.blocks.path),
      }
      marked += r.events.path?.length ?? 0
      markedBlocks += r.blocks.path?.length ?? 0
    }
    rows[info.id] = list
  }

  const fl = raw.flows
  const flows: FlowData = {
    cats: fl?.cats ?? [],
    count: fl?.cat?.length ?? 0,
    cat: i32(fl?.cat),
    fromTrack: i32(fl?.from_track),
    fromDepth: i32(fl?.from_depth),
    fromT: f64(fl?.from_ts, offset),
    fromId: f64(fl?.from_id),
    toTrack: i32(fl?.to_track),
    toDepth: i32(fl?.to_depth),
    toT: f64(fl?.to_ts, offset),
    toId: f64(fl?.to_id),
    total: fl?.total ?? 0,
    capped: Boolean(fl?.capped),
    crossing: fl?.crossing ?? 0,
  }

  const counters: CounterData[] = (raw.counters ?? []).map((c) => {
    const v = f64(c.v)
    let max = 0
    for (let i = 0; i < v.length; i++) if (v[i] > max) max = v[i]
    return { name: c.name, kind: c.kind, device: c.device, unit: c.unit, t: f64(c.t, offset), v, max }
  })

  return {
    start: offset,
    end: raw.end_us - traceStart,
    width: raw.width,
    usPerPx: raw.us_per_px,
    mergePx: raw.merge_px,
    traceStart,
    traceEnd: raw.trace_end_us - traceStart,
    names,
    nameColor,
    tracks,
    rows,
    steps: { name: (raw.steps?.name ?? []).map(String), start: f64(raw.steps?.start, offset), end: f64(raw.steps?.end, offset), capped: Boolean(raw.steps?.capped) },
    flows,
    counters,
    stats: raw.stats ?? { events: 0, shown: 0, blocks: 0, hidden: 0 },
    critical: decodeCritical(raw, traceStart, offset, marked, markedBlocks),
  }
}

function decodeCritical(raw: RawTimeline, traceStart: number, offset: number, marked: number, markedBlocks: number): CriticalData | null {
  const c = raw.critical
  if (!c) return null
  const e = c.edges
  return {
    step: c.step,
    start: c.start_us - traceStart,
    end: c.end_us - traceStart,
    nodes: c.nodes,
    count: e.kind.length,
    kinds: e.kinds,
    kind: i32(e.kind),
    fromTrack: i32(e.from_track),
    fromDepth: i32(e.from_depth),
    fromT: f64(e.from_ts, offset),
    toTrack: i32(e.to_track),
    toDepth: i32(e.to_depth),
    toT: f64(e.to_ts, offset),
    marked,
    markedBlocks,
  }
}

/** The largest value of each counter over the given frames (the scale of its track). */
export function counterMaxima(...frames: (Frame | null)[]): Map<string, number> {
  const max = new Map<string, number>()
  for (const f of frames) {
    if (!f) continue
    for (const c of f.counters) max.set(c.name, Math.max(max.get(c.name) ?? 0, c.max))
  }
  return max
}

/** Index of the last element <= x in a sorted array (-1 when none). */
export function lastAtOrBefore(sorted: Float64Array, x: number): number {
  let lo = 0
  let hi = sorted.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (sorted[mid] <= x) lo = mid + 1
    else hi = mid
  }
  return lo - 1
}

/** Index of the first element >= x in a sorted array (length when none). */
export function firstAtOrAfter(sorted: Float64Array, x: number): number {
  let lo = 0
  let hi = sorted.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (sorted[mid] < x) lo = mid + 1
    else hi = mid
  }
  return lo
}
