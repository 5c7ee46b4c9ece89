// Client of the Trace view's routes (`timeline`, `timeline/event`, `timeline/search`,
// `timeline/range`, `trace/download`), typed by the contract (api/index.ts: each option is
// declared once, in views/trace/options.py): URLs relative to the module, ApiError /
// LoadingError (202) as everywhere else.

import { csvUrl, request, requestUrl, routeLink, type Schemas, type Selection } from '../../api'

export type RawTimeline = Schemas['TimelinePayload']
export type RawTrack = Schemas['Track']
/** A track without its rows: what the layout and the details need of it, whatever the window. */
export type TrackInfo = Omit<RawTrack, 'rows'>
export type EventDetails = Schemas['TimelineEventPayload']
/** A correlated launch or kernel of the selected event. */
export type Partner = Schemas['CorrelatedEvent']
export type SearchResult = Schemas['TimelineSearchPayload']
export type SearchMatch = Schemas['SearchMatch']
export type RangeAggregate = Schemas['TimelineRangePayload']
export type RangeRow = Schemas['RangeRow']

/** Absolute us as a query value, rounded to ns (a stable request key; enough for sub-us
 * windows on 1.7e15 us timestamps, where a double holds 0.25 us). */
export function usParam(value: number): number
export function usParam(value: number | undefined): number | undefined
export function usParam(value: number | undefined): number | undefined {
  if (value === undefined) return undefined
  return Number.isInteger(value) ? value : Number(value.toFixed(3))
}

function rangeQuery(sel: Selection, start: number, end: number, tracks: number[]) {
  return { ...sel, start_us: usParam(start), end_us: usParam(end), tracks: tracks.join(',') }
}

export const traceApi = {
  /** One timeline request by URL (the LOD loader builds the URLs and retries a 202). */
  timeline(url: string, signal: AbortSignal): Promise<RawTimeline> {
    return requestUrl('timeline', url, signal)
  },

  /** `critical`: a step whose critical path the payload marks (GPU Idle's "Show on Trace"). */
  timelineUrl(sel: Selection, window: { start?: number; end?: number; width: number }, critical?: string | null): string {
    return routeLink('timeline', { ...sel, start_us: usParam(window.start), end_us: usParam(window.end), width: Math.max(1, Math.round(window.width)), critical_step: critical || undefined })
  },

  event(sel: Selection, id: number, signal?: AbortSignal): Promise<EventDetails> {
    return request('timeline/event', { ...sel, id }, signal)
  },

  search(sel: Selection, q: string, limit: number, startUs?: number, signal?: AbortSignal): Promise<SearchResult> {
    return request('timeline/search', { ...sel, q, limit, start_us: usParam(startUs) }, signal)
  },

  /** Counts, total and self time by name over [start, end] (absolute us) on `tracks`. */
  range(sel: Selection, start: number, end: number, tracks: number[], signal?: AbortSignal): Promise<RangeAggregate> {
    return request('timeline/range', rangeQuery(sel, start, end, tracks), signal)
  },

  rangeCsvUrl(sel: Selection, start: number, end: number, tracks: number[]): string {
    return csvUrl('timeline/range', rangeQuery(sel, start, end, tracks))
  },

  downloadUrl(sel: Selection): string {
    return routeLink('trace/download', { ...sel })
  },
}
