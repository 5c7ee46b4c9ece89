// API client of the Diff view: `diff?run&worker&span&exp_run&exp_worker&exp_span&path&basis`
// (build_diff: one node of the aligned operator trees, its children and operator deltas),
// `diff/kernels` (every kernel of both traces compared) and `diff/default` (the experiment the
// server proposes for a baseline).
import { getJson, routeUrl, type Schemas, type Selection } from '../../api'

export type DiffPayload = Schemas['DiffPayload']
export type DiffSide = Schemas['DiffSide']
export type DiffChild = Schemas['DiffChild']
/** base_/exp_/delta_ + calls | host_total_us | host_self_us | device_total_us | device_self_us */
export type OperatorDelta = Schemas['OperatorDelta']
export type DiffKernels = Schemas['DiffKernelsPayload']
export type KernelDelta = Schemas['KernelDelta']
export type DiffDefault = Schemas['DiffDefault']
export type Basis = 'per_step' | 'total'
export type KernelGrouping = 'kernel' | 'operator_kernel'

/** The experiment side of a diff (UI selection, not a payload). */
export interface Experiment {
  exp_run: string
  exp_worker: string
  exp_span: string
}

export function fetchDiff(sel: Selection, exp: Experiment, path: string, basis: Basis, signal?: AbortSignal): Promise<DiffPayload> {
  return getJson<DiffPayload>('diff', { ...sel, ...exp, path, basis }, signal)
}

export function diffCsvUrl(sel: Selection, exp: Experiment, path: string, basis: Basis): string {
  return routeUrl('diff', { ...sel, ...exp, path, basis, format: 'csv' })
}

export function fetchDiffKernels(sel: Selection, exp: Experiment, groupBy: KernelGrouping, basis: Basis, signal?: AbortSignal): Promise<DiffKernels> {
  return getJson<DiffKernels>('diff/kernels', { ...sel, ...exp, group_by: groupBy, basis }, signal)
}

export function diffKernelsCsvUrl(sel: Selection, exp: Experiment, groupBy: KernelGrouping, basis: Basis): string {
  return routeUrl('diff/kernels', { ...sel, ...exp, group_by: groupBy, basis, format: 'csv' })
}

export function fetchDiffDefault(sel: Selection, signal?: AbortSignal): Promise<DiffDefault> {
  return getJson<DiffDefault>('diff/default', { ...sel }, signal)
}
