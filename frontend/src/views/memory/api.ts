// API client of the Memory view: `memory` (build_memory) and `memory/timeline` (the
// export_memory_timeline categories). Times are trace us, sizes bytes.
import { ApiError, getJson, routeUrl, type Selection } from '../../api'

export interface MemoryCurve {
  t_us: (number | null)[]
  allocated: (number | null)[]
  reserved: (number | null)[]
  approximate: boolean
}

export interface MemoryPeak {
  bytes: number
  t_us: number | null
  reserved_bytes: number | null
  capacity_bytes: number | null
  fraction_of_capacity: number | null
  approximate: boolean
}

export interface MemoryEvent {
  device: string
  op: string
  bytes: number
  alloc_t_us: number | null
  free_t_us: number | null
  duration_us: number | null
}

export interface MemoryOperator {
  device: string
  name: string
  calls: number
  self_increase_bytes: number
  self_alloc_bytes: number
  self_alloc_count: number
  increase_bytes: number
  alloc_bytes: number
  alloc_count: number
}

export interface GrowthLeak {
  device?: string
  kind: 'growth'
  steps: string[]
  allocated_at_step_end: number[]
  growth_bytes: number
  per_step_bytes: number
  approximate?: boolean
  basis?: 'steps' | 'windows'
}

export interface UnfreedLeak {
  device?: string
  kind: 'unfreed'
  count: number
  bytes: number
  top_ops?: { name: string; count: number; bytes: number }[]
  by_category?: { category: string; bytes: number }[]
}

export type Leak = GrowthLeak | UnfreedLeak

export interface MemoryPayload {
  devices: string[]
  default_device: string | null
  time_origin_us: number | null
  range_us: [number | null, number | null]
  curves: Record<string, MemoryCurve>
  peaks: Record<string, MemoryPeak>
  events: { rows: MemoryEvent[]; total: number; truncated: boolean }
  operators: { rows: MemoryOperator[] }
  leaks: Leak[]
  messages: string[]
}

export interface MemoryTimeline {
  categories: string[]
  t_us: number[]
  series: Record<string, number[]>
  total: number[]
  peak: { bytes: number; t_us: number } | null
  records: number
  skipped: number
  messages: string[]
  base_time_ns: number | null
  leaks: Leak[]
}

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
