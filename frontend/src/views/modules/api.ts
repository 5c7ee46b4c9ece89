// API client of the Module view: `modules?run&worker&span` (build_modules). Times are totals over
// all calls of a row, in us.
import { ApiError, getJson, routeUrl, type Selection } from '../../api'

export interface ModuleRow {
  key: string
  name: string
  module_id: number
  module_type?: string
  occurrences: number
  operators: number
  host_total_us: number
  host_self_us: number
  device_total_us: number
  device_self_us: number
  avg_duration_us: number
  backward_host_us?: number
  backward_device_us?: number
  missing_calls?: number
  children: ModuleRow[]
}

export interface FlameNode {
  name: string
  module_id: number
  value: number
  children: FlameNode[]
}

export interface ModulesPayload {
  available: boolean
  message: string | null
  source: string | null
  has_device: boolean
  has_backward: boolean
  rows: ModuleRow[]
  flamegraph: FlameNode[]
  backward: { pairs: number; matched: number; attributed_ops: number; unattributed_ops: number } | null
  warnings: string[]
}

const UNAVAILABLE: ModulesPayload = {
  available: false,
  message: null,
  source: null,
  has_device: false,
  has_backward: false,
  rows: [],
  flamegraph: [],
  backward: null,
  warnings: [],
}

export function modulesCsvUrl(sel: Selection): string {
  return routeUrl('modules', { ...sel, format: 'csv' })
}

/** The server answers 404 with the reason when the trace has no module events. */
export async function fetchModules(sel: Selection, signal?: AbortSignal): Promise<ModulesPayload> {
  try {
    return { ...(await getJson<Omit<ModulesPayload, 'message'>>('modules', { ...sel }, signal)), message: null }
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return { ...UNAVAILABLE, message: err.message }
    throw err
  }
}
