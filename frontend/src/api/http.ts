// The one HTTP path of the frontend: every JSON request of every view (the trace engine's
// included) goes through getJson, so errors, 202 "still loading" replies and aborts are handled
// the same way everywhere. getJson sends one request: a 202 throws LoadingError (with the
// server's progress and when to ask again) and the caller's scheduler retries it -- TanStack Query for
// the views (api/query.ts), the LOD loader for the Trace view's timeline (views/trace/lod-loader.ts),
// both after `retryAfterMs`.
//
// Routes are resolved relative to the plugin's base URL, the folder of the ES module TensorBoard
// loaded (`<prefix>/data/plugin/torch_prof/`), so `--path_prefix` works and no absolute URL is
// ever built.

/** A failed request: HTTP status plus the server's `{"error": {code, message}}` when it sent one. */
export class ApiError extends Error {
  readonly status: number
  readonly code: string
  readonly messages: string[]

  constructor(status: number, code: string, message: string, messages: string[] = []) {
    super(message)
    this.name = 'ApiError'
    this.status = status
    this.code = code
    this.messages = messages
  }
}

/** 202: the worker is still being loaded; ask again after `retryAfterMs`: the server's
 * estimate of the rest of the parse (`retry_after_ms` in the body), else its Retry-After. */
export class LoadingError extends Error {
  readonly progress: number
  readonly retryAfterMs: number

  constructor(progress: number, retryAfterMs = DEFAULT_RETRY_MS) {
    super('Loading')
    this.name = 'LoadingError'
    this.progress = progress
    this.retryAfterMs = retryAfterMs
  }
}

const DEFAULT_RETRY_MS = 1000

let baseUrl: URL | null = null

/** Set by render(): the folder the module was loaded from (or a dev override). */
export function setBaseUrl(url: string | URL): void {
  baseUrl = new URL(url.toString())
}

function base(): URL {
  if (!baseUrl) baseUrl = new URL('.', import.meta.url)
  return baseUrl
}

export type Params = Record<string, string | number | undefined | null>

/** The absolute URL (same origin as the module) of a route, for fetch() and download links. */
export function routeUrl(route: string, params: Params = {}): string {
  const url = new URL(route, base())
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null) url.searchParams.set(key, String(value))
  }
  return url.toString()
}

/** GET `url` (from routeUrl) and parse its JSON body; throws ApiError, LoadingError or AbortError. */
export async function getJson<T>(url: string, signal?: AbortSignal): Promise<T> {
  let response: Response
  try {
    response = await fetch(url, { signal, credentials: 'same-origin', headers: { Accept: 'application/json' } })
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err
    throw new ApiError(0, 'network', `Cannot reach TensorBoard (${(err as Error).message})`)
  }
  const body = parse(await response.text())
  if (response.status === 202) {
    const loading = body as { progress?: unknown; retry_after_ms?: unknown } | null
    const progress = Number(loading?.progress ?? 0)
    throw new LoadingError(Number.isFinite(progress) ? progress : 0, retryAfter(response, loading?.retry_after_ms))
  }
  if (!response.ok) throw errorOf(response, body)
  if (body === null) throw new ApiError(response.status, 'bad_json', `Invalid JSON from ${new URL(url).pathname}`)
  return body as T
}

/** POST `body` as JSON to `url` (from routeUrl) and parse the JSON answer; throws ApiError. */
export async function postJson<T>(url: string, body: unknown, signal?: AbortSignal): Promise<T> {
  let response: Response
  try {
    response = await fetch(url, {
      method: 'POST',
      signal,
      credentials: 'same-origin',
      headers: { Accept: 'application/json', 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    })
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err
    throw new ApiError(0, 'network', `Cannot reach TensorBoard (${(err as Error).message})`)
  }
  const parsed = parse(await response.text())
  if (!response.ok) throw errorOf(response, parsed)
  if (parsed === null) throw new ApiError(response.status, 'bad_json', `Invalid JSON from ${new URL(url).pathname}`)
  return parsed as T
}

function parse(text: string): unknown {
  if (!text) return null
  try {
    return JSON.parse(text)
  } catch {
    return null
  }
}

/** The server's error body is `{"error": {"code", "message", "messages"?}}` (openapi.yaml). */
function errorOf(response: Response, body: unknown): ApiError {
  const err = (body as { error?: { code?: unknown; message?: unknown; messages?: unknown } } | null)?.error
  const messages = Array.isArray(err?.messages) ? err.messages.map(String) : []
  const message =
    typeof err?.message === 'string' && err.message ? err.message : (messages[0] ?? `${response.status} ${response.statusText || 'error'}`)
  return new ApiError(response.status, typeof err?.code === 'string' ? err.code : String(response.status), message, messages)
}

function retryAfter(response: Response, hintMs: unknown): number {
  const hint = typeof hintMs === 'number' ? hintMs : NaN
  if (Number.isFinite(hint) && hint > 0) return hint
  const seconds = Number(response.headers.get('Retry-After'))
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : DEFAULT_RETRY_MS
}
