import { describe, expect, it } from 'vitest'
import { fmtBytes, fmtCounter, fmtDuration, fmtLoaded, fmtTick, fmtTime, niceStep } from './timefmt'

describe('fmtDuration', () => {
  it('picks the unit by magnitude and trims zeros', () => {
    expect(fmtDuration(0)).toBe('0 us')
    expect(fmtDuration(0.5)).toBe('500 ns')
    expect(fmtDuration(0.005)).toBe('5 ns')
    expect(fmtDuration(5)).toBe('5 us')
    expect(fmtDuration(12.5)).toBe('12.5 us')
    expect(fmtDuration(250.25)).toBe('250.3 us')
    expect(fmtDuration(4200)).toBe('4.2 ms')
    expect(fmtDuration(-4200)).toBe('-4.2 ms')
    expect(fmtDuration(1_203_000)).toBe('1.203 s')
  })

  it('shows a dash for missing values', () => {
    expect(fmtDuration(null)).toBe('–')
    expect(fmtDuration(undefined)).toBe('–')
    expect(fmtDuration(Number.NaN)).toBe('–')
  })
})

describe('niceStep', () => {
  it('rounds up to 1, 2 or 5 times a power of ten', () => {
    expect(niceStep(1)).toBe(1)
    expect(niceStep(3)).toBe(5)
    expect(niceStep(7)).toBe(10)
    expect(niceStep(150)).toBe(200)
    expect(niceStep(0.03)).toBeCloseTo(0.05, 12)
  })

  it('falls back to 1 us for nonsense', () => {
    expect(niceStep(0)).toBe(1)
    expect(niceStep(-5)).toBe(1)
    expect(niceStep(Number.POSITIVE_INFINITY)).toBe(1)
  })
})

describe('fmtTick', () => {
  it('uses the view\'s unit and the step\'s decimals', () => {
    expect(fmtTick(200_000, 100_000, 958_282)).toBe('200 ms')
    expect(fmtTick(468_700, 100, 958_282)).toBe('468.7 ms')
    expect(fmtTick(0, 1e6, 5e6)).toBe('0 s')
    expect(fmtTick(0.5, 0.1, 0.9)).toBe('500 ns')
    expect(fmtTick(60_300_000, 100_000, 60_700_000)).toBe('60.3 s')
  })
})

describe('fmtTime', () => {
  it('keeps more precision than a tick label', () => {
    expect(fmtTime(500)).toBe('500 us')
    expect(fmtTime(12.3456)).toBe('12.346 us')
    expect(fmtTime(1234.5)).toBe('1.2345 ms')
    expect(fmtTime(2_500_000)).toBe('2.5 s')
  })
})

describe('counters', () => {
  it('formats bytes in binary units', () => {
    expect(fmtBytes(500)).toBe('500 B')
    expect(fmtBytes(1536)).toBe('1.5 KiB')
    expect(fmtBytes(10 * 1024 * 1024)).toBe('10 MiB')
    expect(fmtBytes(300 * 1024 ** 3)).toBe('300 GiB')
  })

  it('formats a counter by its unit', () => {
    expect(fmtCounter(0.456, 'fraction')).toBe('45.6 %')
    expect(fmtCounter(1536, 'bytes')).toBe('1.5 KiB')
    expect(fmtCounter(3.14159, 'count')).toBe('3.14')
    expect(fmtCounter(Number.NaN, 'count')).toBe('–')
  })

  it('writes the status line', () => {
    expect(fmtLoaded({ events: 2399, blocks: 201, hidden: 1919 })).toBe('2,399 events loaded · 1,919 in 201 merged blocks')
    expect(fmtLoaded({ events: 5, blocks: 0, hidden: 0 })).toBe('5 events loaded')
  })
})
