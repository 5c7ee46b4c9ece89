import { describe, expect, it } from 'vitest'
import { offsetsParam, ranksUrl } from './api'

describe('ranks api', () => {
  it('writes offsets as sorted rank:us pairs, none when empty', () => {
    expect(offsetsParam({})).toBeUndefined()
    expect(offsetsParam({ 3: 12, 1: -85.5 })).toBe('1:-85.5,3:12')
    expect(offsetsParam({ 2: 1 / 3, 4: Number.NaN })).toBe('2:0.333')
  })

  it('builds the window request with ranks, host and offsets', () => {
    const url = ranksUrl({ run: 'r', span: '1', ranks: [0, 1], host: true, offsets: { 1: 100 } }, { start: 10.5, end: 20, width: 799.6 })
    const params = new URL(url, 'http://x/').searchParams
    expect(Object.fromEntries(params)).toEqual({ run: 'r', span: '1', ranks: '0,1', host: 'on', offsets: '1:100', start_us: '10.5', end_us: '20', width: '800' })
    expect(new URL(url, 'http://x/').pathname.endsWith('/ranks')).toBe(true)
  })
})
