// The Diff view's requests through the typed client against a stubbed global fetch (the
// browser's API, not one of ours); its choices are the contract's (views/diff/options.py).
import { afterEach, describe, expect, expectTypeOf, it, vi } from 'vitest'
import { setBaseUrl } from '../../api'
import { diffKernelsCsvUrl, fetchDiff, fetchDiffDefault, fetchDiffKernels, type Basis, type KernelGrouping } from './api'

const BASE = 'http://127.0.0.1:6006/data/plugin/torch_prof/'
const SEL = { run: 'a', worker: 'w', span: '1' }
const EXP = { exp_run: 'b', exp_worker: 'v', exp_span: '2' }

afterEach(() => {
  vi.unstubAllGlobals()
})

describe('diff api', () => {
  it('asks diff, diff/kernels and diff/default with their declared options', async () => {
    setBaseUrl(BASE)
    const fetch = vi.fn(async (_url: string) => new Response('{}', { status: 200 }))
    vi.stubGlobal('fetch', fetch)
    await fetchDiff(SEL, EXP, '0/2', 'total')
    await fetchDiffKernels(SEL, EXP, 'operator_kernel', 'per_step')
    await fetchDiffDefault(SEL)
    expect(fetch.mock.calls.map(([url]) => url)).toEqual([
      `${BASE}diff?run=a&worker=w&span=1&exp_run=b&exp_worker=v&exp_span=2&path=0%2F2&basis=total`,
      `${BASE}diff/kernels?run=a&worker=w&span=1&exp_run=b&exp_worker=v&exp_span=2&group_by=operator_kernel&basis=per_step`,
      `${BASE}diff/default?run=a&worker=w&span=1`,
    ])
    expect(diffKernelsCsvUrl(SEL, EXP, 'kernel', 'total')).toBe(
      `${BASE}diff/kernels?run=a&worker=w&span=1&exp_run=b&exp_worker=v&exp_span=2&group_by=kernel&basis=total&format=csv`,
    )
  })

  it('takes its choices from the contract', () => {
    expectTypeOf<Basis>().toEqualTypeOf<'per_step' | 'total'>()
    expectTypeOf<KernelGrouping>().toEqualTypeOf<'kernel' | 'operator_kernel'>()
  })
})
