// The Trace view's requests through the typed client against a stubbed global fetch (the
// browser's API, not one of ours): the query each route declares in views/trace/options.py, with
// absolute times rounded to ns and the range's tracks as the comma list the route's pattern takes.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { setBaseUrl } from '../../api'
import { traceApi, usParam } from './api'

const BASE = 'http://127.0.0.1:6006/data/plugin/torch_prof/'
const SEL = { run: 'r', worker: 'w', span: '1' }

function reply(body: string) {
  const fetch = vi.fn(async (_url: string) => new Response(body, { status: 200 }))
  vi.stubGlobal('fetch', fetch)
  return fetch
}

function query(url: string): Record<string, string> {
  return Object.fromEntries(new URL(url).searchParams)
}

afterEach(() => {
  vi.unstubAllGlobals()
})

describe('trace api', () => {
  it('rounds absolute us to ns and keeps integers and 1.7e15 us timestamps exact', () => {
    expect(usParam(undefined)).toBeUndefined()
    expect(usParam(12)).toBe(12)
    expect(usParam(10.0004)).toBe(10)
    expect(usParam(10.0005)).toBe(10.001)
    expect(usParam(-2.25)).toBe(-2.25)
    // 1.7e15 + 0.25 is a double; its ns rounding is itself.
    expect(usParam(1_700_000_000_000_000.25)).toBe(1_700_000_000_000_000.25)
    expect(String(usParam(1_700_000_000_000_000.25))).toBe('1700000000000000.2')
  })

  it('asks timeline/search and timeline/range with their declared options', async () => {
    setBaseUrl(BASE)
    const fetch = reply('{}')
    await traceApi.search(SEL, 'gemm', 50, 100.1234)
    await traceApi.range(SEL, 1.5, 2_000, [0, 3])
    expect(fetch.mock.calls.map(([url]) => new URL(url).pathname)).toEqual(['/data/plugin/torch_prof/timeline/search', '/data/plugin/torch_prof/timeline/range'])
    expect(query(fetch.mock.calls[0][0])).toEqual({ ...SEL, q: 'gemm', limit: '50', start_us: '100.123' })
    expect(query(fetch.mock.calls[1][0])).toEqual({ ...SEL, start_us: '1.5', end_us: '2000', tracks: '0,3' })
    expect(query(traceApi.rangeCsvUrl(SEL, 1.5, 2_000, [0, 3]))).toEqual({ ...SEL, start_us: '1.5', end_us: '2000', tracks: '0,3', format: 'csv' })
  })

  it('asks timeline/event by id, and leaves the first search page without start_us', async () => {
    setBaseUrl(BASE)
    const fetch = reply('{}')
    await traceApi.event(SEL, 42)
    await traceApi.search(SEL, 'x', 200)
    expect(query(fetch.mock.calls[0][0])).toEqual({ ...SEL, id: '42' })
    expect(query(fetch.mock.calls[1][0])).toEqual({ ...SEL, q: 'x', limit: '200' })
  })

  it('builds the timeline URL the LOD loader fetches, and fetches only timeline URLs', async () => {
    setBaseUrl(BASE)
    const url = traceApi.timelineUrl(SEL, { start: 10.5, end: 20, width: 799.6 }, 'ProfilerStep#3')
    expect(query(url)).toEqual({ ...SEL, start_us: '10.5', end_us: '20', width: '800', critical_step: 'ProfilerStep#3' })
    expect(query(traceApi.timelineUrl(SEL, { width: 0.2 }, null))).toEqual({ ...SEL, width: '1' })
    const fetch = reply('{"tracks": []}')
    await expect(traceApi.timeline(url, new AbortController().signal)).resolves.toEqual({ tracks: [] })
    await expect(traceApi.timeline(traceApi.downloadUrl(SEL), new AbortController().signal)).rejects.toThrow('not a URL of the timeline route')
    expect(fetch).toHaveBeenCalledTimes(1)
  })
})
