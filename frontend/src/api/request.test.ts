// The typed request path (api/index.ts) against a stubbed global fetch (the browser's API, not
// one of ours): the route and query the contract declares become one URL through http.ts, a 202
// still throws LoadingError, and the CSV URL carries format=csv. Wrong routes and options are
// type errors (checked by `tsc -b`, see expectTypeOf below), not runtime ones.
import { afterEach, describe, expect, expectTypeOf, it, vi } from 'vitest'
import { api, csvUrl, LoadingError, request, setBaseUrl, type QueryOf, type ResponseOf } from './index'
import type { KernelGroupBy, OperatorGroupBy, Overview } from './types'

const BASE = 'http://127.0.0.1:6006/data/plugin/torch_prof/'

afterEach(() => {
  vi.unstubAllGlobals()
})

function reply(status: number, body: string) {
  const fetch = vi.fn(async (_url: string) => new Response(body, { status }))
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
})
