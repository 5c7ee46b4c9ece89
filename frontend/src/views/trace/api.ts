// Client of the Trace view's routes (`timeline`, `timeline/event`, `timeline/search`,
// `trace/download`), through the shared HTTP path (api/http.ts): URLs relative to the module,
// ApiError / LoadingError (202) as everywhere else.

import { getJson, routeUrl, type Schemas, type Selection } from '../../api'
import { getJson as getUrl } from '../../api/http'

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

  /** Counts, total and self time by name over [start, end] (absolute us) on `tracks`. */
  range(sel: Selection, start: number, end: number, tracks: number[], signal?: AbortSignal): Promise<RangeAggregate> {
    return getJson<RangeAggregate>('timeline/range', { ...sel, start_us: usParam(start), end_us: usParam(end), tracks: tracks.join(',') }, signal)
  },

  rangeCsvUrl(sel: Selection, start: number, end: number, tracks: number[]): string {
    return routeUrl('timeline/range', { ...sel, start_us: usParam(start), end_us: usParam(end), tracks: tracks.join(','), format: 'csv' })
  },

  downloadUrl(sel: Selection): string {
    return routeUrl('trace/download', { ...sel })
  },
}
