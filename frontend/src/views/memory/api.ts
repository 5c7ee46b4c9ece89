// API client of the Memory view: `memory` (build_memory) and `memory/timeline` (the
// export_memory_timeline categories). Times are trace us, sizes bytes.
import { ApiError, getJson, routeUrl, type Schemas, type Selection } from '../../api'

type MemoryLeak = Schemas['MemoryLeak']
type TimelineLeak = Schemas['MemoryTimelineLeak']

/**
 * A leak hint with the fields its `kind` carries (the schema marks them "kind growth only" /
 * "kind unfreed only", so they are optional there): the server always sends them with that kind.
 */
type Kinded<T extends MemoryLeak | TimelineLeak> =
  | (T & { kind: 'growth' } & Required<Pick<T, 'steps' | 'allocated_at_step_end' | 'growth_bytes' | 'per_step_bytes'>>)
  | (T & { kind: 'unfreed' } & Required<Pick<T, 'count' | 'bytes'>>)

/** A `/memory` leak hint (per device, top operators) or a `/memory/timeline` one (by category). */
export type Leak = Kinded<MemoryLeak> | Kinded<TimelineLeak>

export type MemoryPayload = Omit<Schemas['MemoryPayload'], 'leaks'> & { leaks: Kinded<MemoryLeak>[] }
export type MemoryEvent = Schemas['MemoryEventRow']
export type MemoryOperator = Schemas['MemoryOperatorRow']
export type MemoryTimeline = Omit<Schemas['MemoryTimelinePayload'], 'leaks'> & { leaks: Kinded<TimelineLeak>[] }

export interface MemoryQuery {
  device?: string
  start_us?: number
  end_us?: number
}

export function memoryCsvUrl(sel: Selection, query: MemoryQuery): string {
  return routeUrl('memory', { ...sel, ...query, format: 'csv' })
}

export function fetchMemory(sel: Selection, query: MemoryQuery, signal?: AbortSignal): Promise<MemoryPayload> {
  return getJson<MemoryPayload>('memory', { ...sel, ...query }, signal)
}

/**
 * The category timeline of a span, or of a run's only export when `sel` names just the run (a
 * run that holds exports but no trace); null when there is no export (404).
 */
export async function fetchMemoryTimeline(sel: Selection | { run: string }, signal?: AbortSignal): Promise<MemoryTimeline | null> {
  try {
    return await getJson<MemoryTimeline>('memory/timeline', { ...sel }, signal)
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return null
    throw err
  }
}
