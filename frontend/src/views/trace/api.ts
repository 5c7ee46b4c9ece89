// Client of the Trace view's routes (contract: tb_plugin/analysis/timeline.py, server routes
// `timeline`, `timeline/event`, `timeline/search`, `trace/download`). URLs are built by the shared
// `routeUrl` (relative to the module, so --path_prefix works); errors follow the shared ApiError /
// LoadingError (202) conventions so the shell's banners and retry logic apply unchanged.

import { ApiError, LoadingError, routeUrl, type Selection } from '../../api'

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

type Params = Record<string, string | number | undefined | null>

/**
 * GET `url` as JSON. A 202 (the trace is still being parsed) rejects with LoadingError, which the
 * LOD loader retries; other failures reject with ApiError. `what` names the route in messages.
 */
export async function fetchJson<T>(url: string, signal?: AbortSignal, what: string = url): Promise<T> {
  let response: Response
  try {
    response = await fetch(url, { signal, credentials: 'same-origin', headers: { Accept: 'application/json' } })
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err
    throw new ApiError(0, 'network', `Cannot reach TensorBoard (${(err as Error).message})`)
  }
  const text = await response.text()
  let body: unknown = null
  try {
    body = text ? JSON.parse(text) : null
  } catch {
    body = null
  }
  if (response.status === 202) {
    const progress = Number((body as { progress?: unknown } | null)?.progress ?? 0)
    throw new LoadingError(Number.isFinite(progress) ? progress : 0)
  }
  if (!response.ok) {
    const err = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error
    const message = typeof err?.message === 'string' && err.message ? err.message : `${response.status} ${response.statusText || 'error'}`
    throw new ApiError(response.status, typeof err?.code === 'string' ? err.code : String(response.status), message)
  }
  if (body === null || typeof body !== 'object') throw new ApiError(response.status, 'bad_json', `Invalid JSON from ${what}`)
  return body as T
}

function getJson<T>(route: string, params: Params, signal?: AbortSignal): Promise<T> {
  return fetchJson<T>(routeUrl(route, params), signal, route)
}

/** Absolute us as a query value: enough digits for sub-us windows on 1.7e15 us timestamps. */
function usParam(value: number | undefined): string | undefined {
  if (value === undefined) return undefined
  return Number.isInteger(value) ? String(value) : value.toFixed(3)
}

export const traceApi = {
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
