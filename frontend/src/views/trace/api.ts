// Client of the Trace view's routes (`timeline`, `timeline/event`, `timeline/search`,
// `trace/download`), through the shared HTTP path (api/http.ts): URLs relative to the module,
// ApiError / LoadingError (202) as everywhere else.

import { getJson, routeUrl, type Selection } from '../../api'
import { getJson as getUrl } from '../../api/http'

export type TrackKind = 'cpu' | 'gpu' | 'other'

export interface TrackInfo {
  id: number
  pid: string
  tid: string
  kind: TrackKind
  process: string
  thread: string
  /** Number of rows (nesting depth) of the whole track, whatever the window. */
  depth: number
  event_count: number
}

export interface RawRow {
  depth: number
  events: { name: number[]; start: number[]; dur: number[]; id: number[] }
  blocks: { start: number[]; end: number[]; count: number[] }
}

export interface RawTrack extends TrackInfo {
  rows: RawRow[]
}

export interface RawTimeline {
  view: string
  start_us: number
  end_us: number
  width: number
  us_per_px: number
  origin_us: number
  trace_start_us: number
  trace_end_us: number
  merge_px: number
  names: string[]
  tracks: RawTrack[]
  steps: { total: number; capped: boolean; name: string[]; start: number[]; end: number[] }
  flows: {
    total: number
    capped: boolean
    limit: number
    crossing: number
    cats: string[]
    cat: number[]
    from_track: number[]
    from_depth: number[]
    from_ts: number[]
    from_id: number[]
    to_track: number[]
    to_depth: number[]
    to_ts: number[]
    to_id: number[]
  }
  counters: { name: string; kind: string; device: string; unit: string; t: number[]; v: number[] }[]
  stats: { events: number; shown: number; blocks: number; hidden: number }
}

export interface Partner {
  id: number
  name: string | null
  kind: string
  ts: number | null
  dur: number | null
  track: number | null
  depth: number | null
}

export interface EventFlow {
  cat: string
  id: number | string | null
  direction: 'in' | 'out'
  other_track: number
  other_ts: number
  other_id: number | null
}

export interface EventDetails {
  id: number
  name: string | null
  ts: number | null
  dur: number | null
  ph?: string | null
  cat?: string | null
  pid?: string | null
  tid?: string | null
  external_id?: number | null
  correlation?: number | null
  kind: string
  args: Record<string, Record<string, unknown>>
  track: number | null
  depth: number | null
  parent: number | null
  drawn_end_us?: number
  correlated: Partner[]
  flows: EventFlow[]
  [key: string]: unknown
}

export interface SearchMatch {
  id: number
  name: string
  track: number
  depth: number
  /** Absolute trace time (us). */
  ts: number
  dur: number
}

export interface SearchResult {
  query: string
  total: number
  limit: number
  truncated: boolean
  names: string[]
  name_count: number
  matches: SearchMatch[]
}

/** Absolute us as a query value: enough digits for sub-us windows on 1.7e15 us timestamps. */
function usParam(value: number | undefined): string | undefined {
  if (value === undefined) return undefined
  return Number.isInteger(value) ? String(value) : value.toFixed(3)
}

export const traceApi = {
  /** One timeline request by URL (the LOD loader builds the URLs and retries a 202). */
  timeline(url: string, signal: AbortSignal): Promise<RawTimeline> {
    return getUrl<RawTimeline>(url, signal)
  },

  timelineUrl(sel: Selection, window: { start?: number; end?: number; width: number }): string {
    return routeUrl('timeline', { ...sel, start_us: usParam(window.start), end_us: usParam(window.end), width: Math.max(1, Math.round(window.width)) })
  },

  event(sel: Selection, id: number, signal?: AbortSignal): Promise<EventDetails> {
    return getJson<EventDetails>('timeline/event', { ...sel, id }, signal)
  },

  search(sel: Selection, q: string, limit: number, startUs?: number, signal?: AbortSignal): Promise<SearchResult> {
    return getJson<SearchResult>('timeline/search', { ...sel, q, limit, start_us: usParam(startUs) }, signal)
  },

  downloadUrl(sel: Selection): string {
    return routeUrl('trace/download', { ...sel })
  },
}
