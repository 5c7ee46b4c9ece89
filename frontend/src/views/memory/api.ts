// API client of the Memory view: `memory` (build_memory), `memory/timeline` (the
// export_memory_timeline categories) and `memory/snapshot` (an allocator snapshot of the run).
// Times are trace us (snapshot: its `clock`), sizes bytes.
import { ApiError, csvUrl, request, type QueryOf, type Schemas, type Selection } from '../../api'

/** A growth flag of `/memory` (per device, with the operators allocating what stays) or of
 * `/memory/timeline` (on the export's total). */
export type Leak = Schemas['MemoryLeak'] | Schemas['MemoryTimelineLeak']

export type MemoryPayload = Schemas['MemoryPayload']
export type MemoryEvent = Schemas['MemoryEventRow']
export type MemoryOperator = Schemas['MemoryOperatorRow']
export type MemoryTimeline = Schemas['MemoryTimelinePayload']
export type MemorySnapshot = Schemas['MemorySnapshotPayload']
export type SnapshotSegment = Schemas['SnapshotSegment']
export type SnapshotAllocation = Schemas['SnapshotAllocation']

/** The Memory view's options (`MemoryOptions` in views/memory/options.py). */
export type MemoryQuery = Pick<QueryOf<'memory'>, 'device' | 'start_us' | 'end_us'>

export function memoryCsvUrl(sel: Selection, query: MemoryQuery): string {
  return csvUrl('memory', { ...sel, ...query })
}

export function fetchMemory(sel: Selection, query: MemoryQuery, signal?: AbortSignal): Promise<MemoryPayload> {
  return request('memory', { ...sel, ...query }, signal)
}

/**
 * The category timeline of a span, or of a run's only export when `sel` names just the run (a
 * run that holds exports but no trace); null when there is no export (404).
 */
export async function fetchMemoryTimeline(sel: Selection | { run: string }, signal?: AbortSignal): Promise<MemoryTimeline | null> {
  try {
    return await request('memory/timeline', { ...sel }, signal)
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return null
    throw err
  }
}

/** The snapshot route's options (views/memory/options.py). */
export type SnapshotQuery = Pick<QueryOf<'memory/snapshot'>, 'snapshot' | 'device' | 'start' | 'end' | 'at'>

/**
 * An allocator snapshot of the run (on the span's clock when `sel` names a span); null when the
 * run holds none (404 without a snapshot name). A refused pickle is a 422 ApiError whose message
 * says why.
 */
export async function fetchSnapshot(sel: Selection | { run: string }, query: SnapshotQuery, signal?: AbortSignal): Promise<MemorySnapshot | null> {
  try {
    return await request('memory/snapshot', { ...sel, ...query }, signal)
  } catch (err) {
    if (err instanceof ApiError && err.status === 404 && !query.snapshot && !query.device) return null
    throw err
  }
}

export function snapshotCsvUrl(sel: Selection | { run: string }, query: SnapshotQuery): string {
  return csvUrl('memory/snapshot', { ...sel, ...query })
}
