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

  it('keeps the Trace view\'s critical-path step (t_crit) for Copy link', () => {
    expect(formatState({ ...DEFAULT_STATE, view: 'Trace', tCrit: '5' })).toBe('#view=Trace&t_crit=5')
    expect(parseState('#view=Trace&t_crit=5').tCrit).toBe('5')
  })

  it('keeps the Trace view\'s evidence window (t_win) for Copy link', () => {
    expect(formatState({ ...DEFAULT_STATE, view: 'Trace', tWin: '100.5,200' })).toBe('#view=Trace&t_win=100.5%2C200')
    expect(parseState('#view=Trace&t_win=100.5%2C200').tWin).toBe('100.5,200')
  })

  it('round-trips a state where every field differs from its default', () => {
    const s: UiState = {
      run: 'r', view: 'Diff', worker: 'w', span: '2', memDevice: 'GPU1', expRun: 'r2', expWorker: 'w2', expSpan: '3', diffPath: 'a/b',
      diffBasis: 'total', diffTime: 'host', diffTable: 'kernels',
      opGroup: 'operator_input_shape', opSearch: 'conv', opTopN: '25', opSort: 'host_total_us:desc',
      kGroup: 'kernel_op_launch', kSearch: 'gemm', kOpSearch: 'mm', kTopN: 'all', kSort: 'calls:asc',
      tCrit: '7', tWin: '10.5,20',
      trPin: '3,1', trHide: '2', trOrder: 'gpu%3AGPU%200', trFold: 'counters',
    }
    expect(parseState(formatState(s))).toEqual(s)
  })
})
