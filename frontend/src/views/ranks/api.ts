// Client of the multi-rank timeline (`ranks?run&span&ranks&offsets&host&start_us&end_us&width`):
// one window of the run clock over chosen ranks, shaped like `/timeline` (so the Trace view's
// engine draws it) plus the lanes, their clock offsets and the collective links.
import { requestUrl, routeLink, type Schemas } from '../../api'
import { usParam, type RawTimeline } from '../trace/api'
import type { TimelineWindow } from '../trace/lod-loader'

export type RanksPayload = Schemas['RanksTimelinePayload']
export type RankLane = Schemas['RankLane']

export interface RanksQuery {
  run: string
  span: string
  ranks: number[]
  host: boolean
  /** rank -> offset (us) overriding the estimate */
  offsets: Record<number, number>
}

/** `rank:us` pairs, the route's `offsets` (absent when none). */
export function offsetsParam(offsets: Record<number, number>): string | undefined {
  const pairs = Object.entries(offsets)
    .filter(([, v]) => Number.isFinite(v))
    .sort(([a], [b]) => Number(a) - Number(b))
    .map(([r, v]) => `${r}:${Number(v.toFixed(3))}`)
  return pairs.length ? pairs.join(',') : undefined
}

export function ranksUrl(q: RanksQuery, win: TimelineWindow): string {
  return routeLink('ranks', {
    run: q.run,
    span: q.span,
    ranks: q.ranks.length ? q.ranks.join(',') : undefined,
    host: q.host ? 'on' : undefined,
    offsets: offsetsParam(q.offsets),
    start_us: usParam(win.start),
    end_us: usParam(win.end),
    width: Math.max(1, Math.round(win.width)),
  })
}

/** One window; `seen` hears every payload (the lanes and links the engine does not keep). */
export function fetchRanks(seen: (payload: RanksPayload) => void) {
  return async (url: string, signal: AbortSignal): Promise<RawTimeline> => {
    const payload = await requestUrl('ranks', url, signal)
    seen(payload)
    return payload as unknown as RawTimeline
  }
}
