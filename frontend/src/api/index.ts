// Typed client for the torch-prof HTTP API (tb_plugin/server, contract in tb_plugin/openapi.yaml).
// `request(route, query)` takes its route, query and answer types from the contract
// (generated.ts, `npm run gen:types`), so a view's options are declared once, in Python
// (views/<view>/options.py), and a renamed or retyped option is a type error here. `csvUrl` and
// `routeLink` build typed links; `requestUrl` fetches a URL that `routeLink` built (the
// level-of-detail loaders key their requests by URL); `submit` is the one POST. The views' own
// routes are in views/<name>/api.ts; no view imports http.ts (ESLint checks it), which sends
// every request, so errors, 202s and aborts are handled in one place.
import type { paths } from './generated'
import { getJson, postJson, routeUrl, type Params } from './http'
import type { CallStackRow, KernelGroupBy, OperatorGroupBy, Selection } from './types'

export { ApiError, LoadingError, setBaseUrl } from './http'
export * from './types'

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
  return getJson<ResponseOf<R>>(routeLink(route, query), signal)
}

/** The URL of a GET route with its typed query: a link (a download), or a request key. */
export function routeLink<R extends Route>(route: R, query: QueryOf<R>): string {
  return routeUrl(route, query as unknown as Params)
}

/** GET a URL that `routeLink(route, ...)` built, its answer typed as `route`'s; a URL of any
 * other route is refused before anything is sent. */
export function requestUrl<R extends Route>(route: R, url: string, signal?: AbortSignal): Promise<ResponseOf<R>> {
  const expected = new URL(routeUrl(route)).pathname
  if (new URL(url).pathname !== expected) return Promise.reject(new Error(`${url} is not a URL of the ${route} route`))
  return getJson<ResponseOf<R>>(url, signal)
}

/** The download URL of a route's CSV (`format=csv`), typed like `request`. */
export function csvUrl<R extends Route>(route: R, query: QueryOf<R>): string {
  return routeUrl(route, { ...(query as unknown as Params), format: 'csv' })
}

/** A POST route of the contract, without its leading slash ("capture"). */
export type PostRoute = {
  [P in keyof paths]: P extends `/${infer R}` ? (paths[P] extends { post: object } ? R : never) : never
}[keyof paths]
type Post<R extends PostRoute> = paths[`/${R}`] extends { post: infer G } ? G : never
/** The JSON body a POST route takes. */
export type BodyOf<R extends PostRoute> =
  Post<R> extends { requestBody: { content: { 'application/json': infer B } } } ? B : never
/** The JSON body of a POST route's 200 answer. */
export type PostResponseOf<R extends PostRoute> =
  Post<R> extends { responses: { 200: { content: { 'application/json': infer B } } } } ? B : never

/** POST `body` as JSON to `route`, both typed by the contract. */
export function submit<R extends PostRoute>(route: R, body: BodyOf<R>, signal?: AbortSignal): Promise<PostResponseOf<R>> {
  return postJson<PostResponseOf<R>>(routeUrl(route), body, signal)
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
