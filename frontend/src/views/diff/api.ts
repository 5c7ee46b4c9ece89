// API client of the Diff view: `diff?run&worker&span&exp_run&exp_worker&exp_span&path`
// (build_diff: one node of the aligned operator trees, its children and operator deltas).
import { getJson, routeUrl, type Schemas, type Selection } from '../../api'

export type DiffPayload = Schemas['DiffPayload']
export type DiffSide = Schemas['DiffSide']
export type DiffChild = Schemas['DiffChild']
/** base_/exp_/delta_ + calls | host_total_us | host_self_us | device_total_us | device_self_us */
export type OperatorDelta = Schemas['OperatorDelta']

/** The experiment side of a diff (UI selection, not a payload). */
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
