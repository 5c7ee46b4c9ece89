// The shared HTTP path against a stubbed global fetch (the browser's API, not one of ours): one
// request per call; a 202 becomes LoadingError carrying the progress and the server's Retry-After
// (the callers' schedulers retry), an error body becomes ApiError.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { ApiError, LoadingError, getJson, routeUrl, setBaseUrl } from './http'

function reply(status: number, body: string, headers: Record<string, string> = {}) {
  const fetch = vi.fn(async () => new Response(body, { status, headers }))
  vi.stubGlobal('fetch', fetch)
  return fetch
}

afterEach(() => {
  vi.unstubAllGlobals()
})

describe('routeUrl', () => {
  it('resolves routes under the base and drops null/undefined parameters', () => {
    setBaseUrl('http://127.0.0.1:6006/prefix/data/plugin/torch_prof/')
    expect(routeUrl('timeline', { run: 'a b', worker: null, span: undefined, width: 800 })).toBe(
      'http://127.0.0.1:6006/prefix/data/plugin/torch_prof/timeline?run=a+b&width=800',
    )
  })
})

describe('getJson', () => {
  const url = 'http://127.0.0.1:6006/data/plugin/torch_prof/overview?run=r'

  it('returns the parsed body of a 200', async () => {
    reply(200, '{"steps": [1, 2]}')
    await expect(getJson(url)).resolves.toEqual({ steps: [1, 2] })
  })

  it('turns a 202 into LoadingError with the progress and Retry-After, after one request', async () => {
    const fetch = reply(202, '{"loading": true, "progress": 0.25, "state": "loading"}', { 'Retry-After': '2' })
    const error = await getJson(url).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LoadingError)
    expect((error as LoadingError).progress).toBe(0.25)
    expect((error as LoadingError).retryAfterMs).toBe(2000)
    expect(fetch).toHaveBeenCalledTimes(1)
  })

  it("retries after the body's retry_after_ms (the estimated rest of the parse) over Retry-After", async () => {
    reply(202, '{"loading": true, "progress": 0.9, "state": "loading", "retry_after_ms": 200}', { 'Retry-After': '1' })
    const error = (await getJson(url).catch((e: unknown) => e)) as LoadingError
    expect([error.progress, error.retryAfterMs]).toEqual([0.9, 200])
  })

  it("turns an error body into ApiError with the server's code and messages", async () => {
    reply(404, '{"error": {"code": "no_worker", "message": "no worker w", "messages": ["no worker w", "see runs"]}}')
    const error = (await getJson(url).catch((e: unknown) => e)) as ApiError
    expect(error).toBeInstanceOf(ApiError)
    expect([error.status, error.code, error.message, error.messages]).toEqual([404, 'no_worker', 'no worker w', ['no worker w', 'see runs']])
  })

  it('rejects a 200 whose body is not JSON', async () => {
    reply(200, 'not json')
    const error = (await getJson(url).catch((e: unknown) => e)) as ApiError
    expect([error.code, error.message]).toEqual(['bad_json', 'Invalid JSON from /data/plugin/torch_prof/overview'])
  })
})
