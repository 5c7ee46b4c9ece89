import { describe, expect, it } from 'vitest'
import { spanOf, timeTickLabel } from './charts'

describe('timeTickLabel', () => {
  it('never prints long decimals on a long axis (the "10001031.92" labels)', () => {
    const label = timeTickLabel(20_000_000) // 20,000 s
    expect(label(10001031.92)).toBe('10,001 s')
    expect(label(0)).toBe('0 s')
  })
  it('uses seconds from 10 s, with decimals for the span', () => {
    expect(timeTickLabel(12_000)(2500)).toBe('2.5 s')
    expect(timeTickLabel(95_000)(12_345)).toBe('12.3 s')
  })
  it('uses ms below 10 s, with the decimals short spans need', () => {
    expect(timeTickLabel(800)(123.456)).toBe('123 ms')
    expect(timeTickLabel(2.5)(1.23456)).toBe('1.23 ms')
    expect(timeTickLabel(0.02)(0.0123)).toBe('0.012 ms')
  })
  it('spans the zoomed range, else the data', () => {
    expect(spanOf([1, 5, 9], null)).toBe(8)
    expect(spanOf([1, 5, 9], [2, 3])).toBe(1)
    expect(spanOf([], null)).toBe(0)
  })
})
