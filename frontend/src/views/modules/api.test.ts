// The Module view's request through the typed client against a stubbed global fetch (the
// browser's API, not one of ours): a 200 is the payload, the server's 404 (no module events)
// becomes the reason the view shows, any other error stays an error.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { ApiError, setBaseUrl } from '../../api'
import { fetchModules, modulesCsvUrl } from './api'

const BASE = 'http://127.0.0.1:6006/data/plugin/torch_prof/'
const SEL = { run: 'r', worker: 'w', span: '1' }

function reply(status: number, body: string) {
  const fetch = vi.fn(async (_url: string) => new Response(body, { status }))
  vi.stubGlobal('fetch', fetch)
  return fetch
}

afterEach(() => {
  vi.unstubAllGlobals()
})

describe('modules api', () => {
  it('asks /modules with the selection and returns the payload', async () => {
    setBaseUrl(BASE)
    const fetch = reply(200, '{"available": true, "rows": []}')
    await expect(fetchModules(SEL)).resolves.toEqual({ available: true, rows: [] })
    expect(fetch.mock.calls[0][0]).toBe(`${BASE}modules?run=r&worker=w&span=1`)
  })

  it('turns the 404 into the reason, and keeps other errors', async () => {
    setBaseUrl(BASE)
    reply(404, '{"error": {"code": "not_found", "message": "no nn.Module events"}}')
    await expect(fetchModules(SEL)).resolves.toEqual({ available: false, message: 'no nn.Module events' })
    reply(422, '{"error": {"code": "unreadable", "message": "broken"}}')
    const error = await fetchModules(SEL).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ApiError)
    expect((error as ApiError).status).toBe(422)
  })

  it('links the CSV', () => {
    setBaseUrl(BASE)
    expect(modulesCsvUrl(SEL)).toBe(`${BASE}modules?run=r&worker=w&span=1&format=csv`)
  })
})
