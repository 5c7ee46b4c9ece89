// API client of the Diff view: `diff?run&worker&span&exp_run&exp_worker&exp_span&path`
// (build_diff: one node of the aligned operator trees, its children and operator deltas).
import { getJson, routeUrl, type Selection } from '../../api'

export interface DiffSide {
  name: string
  type: string
  count: number
  host_duration_us: number
  device_duration_us: number
  total_duration_us: number
}

export interface DiffDelta {
  host_duration_us: number
  device_duration_us: number
  total_duration_us: number
}

export interface DiffChild {
  path: string
  left: DiffSide
  right: DiffSide
  delta: DiffDelta
  expandable: boolean
}

/** base_/exp_/delta_ + calls | host_total_us | host_self_us | device_total_us | device_self_us */
export interface OperatorDelta {
  name: string
  [metric: string]: number | string
}

export interface DiffPayload {
  path: string
  left: DiffSide
  right: DiffSide
  delta: DiffDelta
  children: DiffChild[]
  operator_deltas: OperatorDelta[]
  operator_sort: string
  per_step: boolean
  base: { tid: string | null; steps: number }
  exp: { tid: string | null; steps: number }
}

export interface Experiment {
  exp_run: string
  exp_worker: string
  exp_span: string
}

export function fetchDiff(sel: Selection, exp: Experiment, path: string, signal?: AbortSignal): Promise<DiffPayload> {
  return getJson<DiffPayload>('diff', { ...sel, ...exp, path }, signal)
}

export function diffCsvUrl(sel: Selection, exp: Experiment, path: string): string {
  return routeUrl('diff', { ...sel, ...exp, path, format: 'csv' })
}
