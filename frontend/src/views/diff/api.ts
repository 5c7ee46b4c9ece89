// API client of the Diff view: `diff?run&worker&span&exp_run&exp_worker&exp_span&path&basis`
// (build_diff: one node of the aligned operator trees, its children and operator deltas),
// `diff/kernels` (every kernel of both traces compared) and `diff/default` (the experiment the
// server proposes for a baseline).
import { csvUrl, request, type QueryOf, type Schemas, type Selection } from '../../api'

export type DiffPayload = Schemas['DiffPayload']
export type DiffSide = Schemas['DiffSide']
export type DiffChild = Schemas['DiffChild']
/** base_/exp_/delta_ + calls | host_total_us | host_self_us | device_total_us | device_self_us */
export type OperatorDelta = Schemas['OperatorDelta']
export type DiffKernels = Schemas['DiffKernelsPayload']
export type KernelDelta = Schemas['KernelDelta']
export type DiffDefault = Schemas['DiffDefault']
/** The Diff routes' options, as views/diff/options.py declares them. */
export type Basis = NonNullable<QueryOf<'diff'>['basis']>
export type KernelGrouping = NonNullable<QueryOf<'diff/kernels'>['group_by']>

/** The experiment side of a diff (UI selection, not a payload). */
export interface Experiment {
  exp_run: string
  exp_worker: string
  exp_span: string
}

export function fetchDiff(sel: Selection, exp: Experiment, path: string, basis: Basis, signal?: AbortSignal): Promise<DiffPayload> {
  return request('diff', { ...sel, ...exp, path, basis }, signal)
}

export function diffCsvUrl(sel: Selection, exp: Experiment, path: string, basis: Basis): string {
  return csvUrl('diff', { ...sel, ...exp, path, basis })
}

export function fetchDiffKernels(sel: Selection, exp: Experiment, groupBy: KernelGrouping, basis: Basis, signal?: AbortSignal): Promise<DiffKernels> {
  return request('diff/kernels', { ...sel, ...exp, group_by: groupBy, basis }, signal)
}

export function diffKernelsCsvUrl(sel: Selection, exp: Experiment, groupBy: KernelGrouping, basis: Basis): string {
  return csvUrl('diff/kernels', { ...sel, ...exp, group_by: groupBy, basis })
}

export function fetchDiffDefault(sel: Selection, signal?: AbortSignal): Promise<DiffDefault> {
  return request('diff/default', { ...sel }, signal)
}
