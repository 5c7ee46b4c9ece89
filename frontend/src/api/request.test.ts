// The typed request path (api/index.ts) against a stubbed global fetch (the browser's API, not
// one of ours): the route and query the contract declares become one URL through http.ts, a 202
// still throws LoadingError, and the CSV URL carries format=csv. Wrong routes and options are
// type errors (checked by `tsc -b`, see expectTypeOf below), not runtime ones.
import { afterEach, describe, expect, expectTypeOf, it, vi } from 'vitest'
import { api, csvUrl, LoadingError, request, requestUrl, routeLink, setBaseUrl, submit, type BodyOf, type PostResponseOf, type QueryOf, type ResponseOf } from './index'
import type { CaptureAccepted, CaptureForm, KernelGroupBy, OperatorGroupBy, Overview } from './types'

const BASE = 'http://127.0.0.1:6006/data/plugin/torch_prof/'

afterEach(() => {
  vi.unstubAllGlobals()
})

function reply(status: number, body: string) {
  const fetch = vi.fn(async (_url: string, _init?: RequestInit) => new Response(body, { status }))
  vi.stubGlobal('fetch', fetch)
  return fetch
}

describe('request', () => {
  it('sends the declared query through the one HTTP path', async () => {
    setBaseUrl(BASE)
    const fetch = reply(200, '{"rows": []}')
    await expect(request('kernels', { run: 'r 1', worker: 'w', span: 's', group_by: 'kernel_op_launch' })).resolves.toEqual({ rows: [] })
    expect(fetch).toHaveBeenCalledTimes(1)
    expect(fetch.mock.calls[0][0]).toBe(`${BASE}kernels?run=r+1&worker=w&span=s&group_by=kernel_op_launch`)
  })

  it('leaves out undefined parameters and keeps the 202 rule', async () => {
    setBaseUrl(BASE)
    const fetch = reply(202, '{"progress": 0.5}')
    const error = await api.kernelPies({ run: 'r', worker: 'w', span: 's' }, null).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LoadingError)
    expect(fetch.mock.calls[0][0]).toBe(`${BASE}kernels/pies?run=r&worker=w&span=s`)
  })

  it('builds the CSV URL of a route', () => {
    setBaseUrl(BASE)
    expect(csvUrl('operators', { run: 'r', worker: 'w', span: 's', group_by: 'operator' })).toBe(
      `${BASE}operators?run=r&worker=w&span=s&group_by=operator&format=csv`,
    )
  })

  it('takes its types from the contract', () => {
    expectTypeOf<OperatorGroupBy>().toEqualTypeOf<'operator' | 'operator_input_shape'>()
    expectTypeOf<KernelGroupBy>().toEqualTypeOf<'kernel' | 'kernel_op_launch'>()
    expectTypeOf<ResponseOf<'overview'>>().toEqualTypeOf<Overview>()
    expectTypeOf<QueryOf<'runs'>>().toEqualTypeOf<Record<string, never>>()
  })

  it('builds a typed link and fetches only URLs of the route it names', async () => {
    setBaseUrl(BASE)
    const url = routeLink('timeline', { run: 'r', worker: 'w', span: 's', start_us: 1.5, width: 800 })
    expect(url).toBe(`${BASE}timeline?run=r&worker=w&span=s&start_us=1.5&width=800`)
    const fetch = reply(200, '{"tracks": []}')
    await expect(requestUrl('timeline', url)).resolves.toEqual({ tracks: [] })
    expect(fetch.mock.calls[0][0]).toBe(url)
    // A URL of another route (here /timeline/search, which shares the prefix) is refused unsent.
    const other = routeLink('timeline/search', { run: 'r', worker: 'w', span: 's', q: 'x' })
    await expect(requestUrl('timeline', other)).rejects.toThrow('is not a URL of the timeline route')
    await expect(requestUrl('ranks', url)).rejects.toThrow('is not a URL of the ranks route')
    expect(fetch).toHaveBeenCalledTimes(1)
  })

  it('posts the typed body of a POST route as JSON', async () => {
    setBaseUrl(BASE)
    const fetch = reply(200, '{"id": "abc", "run": "r", "expected": 1}')
    const form: CaptureForm = { run: 'r', steps: 3, with_stack: false, memory_snapshot: false, record_shapes: true, profile_memory: true }
    await expect(submit('capture', form)).resolves.toEqual({ id: 'abc', run: 'r', expected: 1 })
    const [url, init] = fetch.mock.calls[0]
    expect(url).toBe(`${BASE}capture`)
    expect(init?.method).toBe('POST')
    expect(JSON.parse(String(init?.body))).toEqual(form)
    expectTypeOf<BodyOf<'capture'>>().toEqualTypeOf<CaptureForm>()
    expectTypeOf<PostResponseOf<'capture'>>().toEqualTypeOf<CaptureAccepted>()
  })
})
