// Typed client for the torch-prof HTTP API (tb_plugin/server, contract in tb_plugin/openapi.yaml).
// Each route returns the server's payload as is (types in ./types.ts); the views' own routes are
// in views/<name>/api.ts.
import { getJson as getHttpJson, routeUrl, type Params } from './http'
import type {
  CallStackRow,
  CallStacks,
  KernelGroupBy,
  KernelPies,
  KernelTable,
  OperatorGroupBy,
  OperatorPies,
  OperatorTable,
  Overview,
  RunAdvice,
  RunsResponse,
  Selection,
  ViewSpecs,
} from './types'

export { ApiError, LoadingError, postJson, routeUrl, setBaseUrl, type Params } from './http'
export * from './types'

/** A route's JSON; a 202 throws LoadingError so the caller (TanStack Query) schedules the retry. */
export function getJson<T>(route: string, params: Params = {}, signal?: AbortSignal): Promise<T> {
  return getHttpJson<T>(routeUrl(route, params), signal)
}

export const api = {
  runs: (signal?: AbortSignal) => getJson<RunsResponse>('runs', {}, signal),

  viewSpecs: (signal?: AbortSignal) => getJson<ViewSpecs>('viewspecs', {}, signal).then((body) => body.views),

  views: (run: string, signal?: AbortSignal) => getJson<string[]>('views', { run }, signal),

  workers: (run: string, view: string, signal?: AbortSignal) => getJson<string[]>('workers', { run, view }, signal),

  spans: (run: string, worker: string, signal?: AbortSignal) => getJson<string[]>('spans', { run, worker }, signal),

  overview: (sel: Selection, signal?: AbortSignal) => getJson<Overview>('overview', { ...sel }, signal),

  /** The run-level advice of the selected span (the straggler), shown before a worker's own. */
  overviewRun: (sel: Selection, signal?: AbortSignal) => getJson<RunAdvice>('overview/run', { run: sel.run, span: sel.span }, signal),

  operators: (sel: Selection, groupBy: OperatorGroupBy, signal?: AbortSignal) =>
    getJson<OperatorTable>('operators', { ...sel, group_by: groupBy }, signal),

  operatorPies: (sel: Selection, groupBy: OperatorGroupBy, topN: number | null, signal?: AbortSignal) =>
    getJson<OperatorPies>('operators/pies', { ...sel, group_by: groupBy, top_n: topN ?? undefined }, signal),

  operatorStacks(sel: Selection, groupBy: OperatorGroupBy, name: string, inputShape: string | undefined, signal?: AbortSignal): Promise<CallStackRow[]> {
    const input_shape = groupBy === 'operator_input_shape' ? (inputShape ?? '') : undefined
    return getJson<CallStacks>('operators/stack', { ...sel, group_by: groupBy, name, input_shape }, signal).then((t) => t.rows)
  },

  kernels: (sel: Selection, groupBy: KernelGroupBy, signal?: AbortSignal) => getJson<KernelTable>('kernels', { ...sel, group_by: groupBy }, signal),

  kernelPies: (sel: Selection, topN: number | null, signal?: AbortSignal) =>
    getJson<KernelPies>('kernels/pies', { ...sel, top_n: topN ?? undefined }, signal),

  operatorsCsvUrl: (sel: Selection, groupBy: OperatorGroupBy) => routeUrl('operators', { ...sel, group_by: groupBy, format: 'csv' }),

  kernelsCsvUrl: (sel: Selection, groupBy: KernelGroupBy) => routeUrl('kernels', { ...sel, group_by: groupBy, format: 'csv' }),
}
