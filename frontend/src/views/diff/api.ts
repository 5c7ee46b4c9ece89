// API client of the Diff view: `diff?run&worker&span&exp_run&exp_worker&exp_span&path`
// (build_diff: one node of the aligned operator trees, its children and operator deltas).
import { getJson, routeUrl, type Selection } from '../../api'
import { list } from '../common/payload'

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

export async function fetchDiff(sel: Selection, exp: Experiment, path: string, signal?: AbortSignal): Promise<DiffPayload> {
  const raw = await getJson<Record<string, unknown>>('diff', { ...sel, ...exp, path }, signal)
  return {
    path: String(raw.path ?? path),
    left: raw.left as DiffSide,
    right: raw.right as DiffSide,
    delta: raw.delta as DiffDelta,
    children: list<DiffChild>(raw.children),
    operator_deltas: list<OperatorDelta>(raw.operator_deltas),
    operator_sort: typeof raw.operator_sort === 'string' ? raw.operator_sort : 'delta_host_total_us',
    per_step: Boolean(raw.per_step),
    base: (raw.base ?? { tid: null, steps: 0 }) as DiffPayload['base'],
    exp: (raw.exp ?? { tid: null, steps: 0 }) as DiffPayload['exp'],
  }
}

export function diffCsvUrl(sel: Selection, exp: Experiment, path: string): string {
  return routeUrl('diff', { ...sel, ...exp, path, format: 'csv' })
}
