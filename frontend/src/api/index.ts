// Typed client for the torch-prof HTTP API (tb_plugin/server, contract in tb_plugin/openapi.yaml).
// `request(route, query)` takes its route, query and answer types from the contract
// (generated.ts, `npm run gen:types`), so a view's options are declared once, in Python
// (views/<view>/options.py), and a renamed or retyped option is a type error here. The views' own
// routes are in views/<name>/api.ts. Every request still goes through http.ts's getJson.
import type { paths } from './generated'
import { getJson as getHttpJson, routeUrl, type Params } from './http'
import type { CallStackRow, KernelGroupBy, OperatorGroupBy, Selection } from './types'

export { ApiError, LoadingError, postJson, routeUrl, setBaseUrl, type Params } from './http'
export * from './types'

/** A route's JSON; a 202 throws LoadingError so the caller (TanStack Query) schedules the retry. */
export function getJson<T>(route: string, params: Params = {}, signal?: AbortSignal): Promise<T> {
  return getHttpJson<T>(routeUrl(route, params), signal)
}

/** A GET route of the contract, without its leading slash ("operators", "kernels/pies"). */
export type Route = {
  [P in keyof paths]: P extends `/${infer R}` ? (paths[P] extends { get: object } ? R : never) : never
}[keyof paths]
type Get<R extends Route> = paths[`/${R}`] extends { get: infer G } ? G : never
type Query<G> = G extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never
/** The query parameters the server declares for a route (none: an empty object). */
export type QueryOf<R extends Route> = [Query<Get<R>>] extends [never] ? Record<string, never> : Query<Get<R>>
/** The JSON body of a route's 200 answer. */
export type ResponseOf<R extends Route> =
  Get<R> extends { responses: { 200: { content: { 'application/json': infer B } } } } ? B : never

/** GET `route` with `query`, both typed by the contract; a 202 throws LoadingError. */
export function request<R extends Route>(route: R, query: QueryOf<R>, signal?: AbortSignal): Promise<ResponseOf<R>> {
  return getHttpJson<ResponseOf<R>>(routeUrl(route, query as unknown as Params), signal)
}

/** The download URL of a route's CSV (`format=csv`), typed like `request`. */
export function csvUrl<R extends Route>(route: R, query: QueryOf<R>): string {
  return routeUrl(route, { ...(query as unknown as Params), format: 'csv' })
}

export const api = {
  runs: (signal?: AbortSignal) => request('runs', {}, signal),

  viewSpecs: (signal?: AbortSignal) => request('viewspecs', {}, signal).then((body) => body.views),

  views: (run: string, signal?: AbortSignal) => request('views', { run }, signal),

  workers: (run: string, view: string, signal?: AbortSignal) => request('workers', { run, view }, signal),

  spans: (run: string, worker: string, signal?: AbortSignal) => request('spans', { run, worker }, signal),

  overview: (sel: Selection, signal?: AbortSignal) => request('overview', { ...sel }, signal),

  /** The run-level advice of the selected span (the straggler), shown before a worker's own. */
  overviewRun: (sel: Selection, signal?: AbortSignal) => request('overview/run', { run: sel.run, span: sel.span }, signal),

  operators: (sel: Selection, groupBy: OperatorGroupBy, signal?: AbortSignal) => request('operators', { ...sel, group_by: groupBy }, signal),

  operatorPies: (sel: Selection, groupBy: OperatorGroupBy, topN: number | null, signal?: AbortSignal) =>
    request('operators/pies', { ...sel, group_by: groupBy, top_n: topN ?? undefined }, signal),

  operatorStacks(sel: Selection, groupBy: OperatorGroupBy, name: string, inputShape: string | undefined, signal?: AbortSignal): Promise<CallStackRow[]> {
    const input_shape = groupBy === 'operator_input_shape' ? (inputShape ?? '') : undefined
    return request('operators/stack', { ...sel, group_by: groupBy, name, input_shape }, signal).then((t) => t.rows)
  },

  kernels: (sel: Selection, groupBy: KernelGroupBy, signal?: AbortSignal) => request('kernels', { ...sel, group_by: groupBy }, signal),

  kernelPies: (sel: Selection, topN: number | null, signal?: AbortSignal) => request('kernels/pies', { ...sel, top_n: topN ?? undefined }, signal),

  operatorsCsvUrl: (sel: Selection, groupBy: OperatorGroupBy) => csvUrl('operators', { ...sel, group_by: groupBy }),

  kernelsCsvUrl: (sel: Selection, groupBy: KernelGroupBy) => csvUrl('kernels', { ...sel, group_by: groupBy }),
}
