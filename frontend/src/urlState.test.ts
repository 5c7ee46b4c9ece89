import { describe, expect, it } from 'vitest'
import { DEFAULT_STATE, formatState, parseState, type UiState } from './urlState'

describe('parseState', () => {
  it('gives the defaults for an empty hash', () => {
    expect(parseState('')).toEqual(DEFAULT_STATE)
    expect(parseState('#')).toEqual(DEFAULT_STATE)
  })

  it('reads the short URL keys into state fields', () => {
    const s = parseState('#run=cnn+bs32&view=Trace&worker=w0&op_top=all&k_q=gemm&mem_device=GPU0')
    expect(s).toEqual({ ...DEFAULT_STATE, run: 'cnn bs32', view: 'Trace', worker: 'w0', opTopN: 'all', kSearch: 'gemm', memDevice: 'GPU0' })
  })

  it('replaces an unknown grouping by the default one', () => {
    expect(parseState('#op_group=bogus&k_group=nope').opGroup).toBe('operator')
    expect(parseState('#op_group=bogus&k_group=nope').kGroup).toBe('kernel')
    expect(parseState('#k_group=kernel_op_launch').kGroup).toBe('kernel_op_launch')
  })
})

describe('formatState', () => {
  it('omits defaults, so the default state is an empty hash', () => {
    expect(formatState(DEFAULT_STATE)).toBe('')
    expect(formatState({ ...DEFAULT_STATE, opTopN: '' })).toBe('')
  })

  it('writes the changed fields in a fixed order, URL-encoded', () => {
    expect(formatState({ ...DEFAULT_STATE, view: 'Trace', run: 'a b&c' })).toBe('#run=a+b%26c&view=Trace')
  })

  it('round-trips a state where every field differs from its default', () => {
    const s: UiState = {
      run: 'r', view: 'Diff', worker: 'w', span: '2', memDevice: 'GPU1', expRun: 'r2', expWorker: 'w2', expSpan: '3', diffPath: 'a/b',
      diffBasis: 'total', diffTime: 'host', diffTable: 'kernels',
      opGroup: 'operator_input_shape', opSearch: 'conv', opTopN: '25', opSort: 'host_total_us:desc',
      kGroup: 'kernel_op_launch', kSearch: 'gemm', kOpSearch: 'mm', kTopN: 'all', kSort: 'calls:asc',
    }
    expect(parseState(formatState(s))).toEqual(s)
  })
})
