import { describe, expect, it } from 'vitest'
import { count, deltaPct, duration, inScale, num2, pct, share, timeScale, us, yesNo } from './format'

describe('format', () => {
  it('us: rounded integer microseconds with en-US grouping', () => {
    expect(us(12345.6)).toBe('12,346')
    expect(us(0)).toBe('0')
    expect(us(null)).toBe('–')
    expect(us(Number.NaN)).toBe('–')
  })

  it('duration: us below 1 ms, then ms and s with two decimals', () => {
    expect(duration(850)).toBe('850 us')
    expect(duration(999.4)).toBe('999 us')
    expect(duration(12_350)).toBe('12.35 ms')
    expect(duration(-2500)).toBe('-2.50 ms')
    expect(duration(1_200_000)).toBe('1.20 s')
    expect(duration(undefined)).toBe('–')
    expect(duration(-0.175)).toBe('0 us') // rounds to zero: no '-0 us'
  })

  it('pct, num2 and count', () => {
    expect(pct(12.5)).toBe('12.50 %')
    expect(pct(null)).toBe('–')
    expect(num2(3.14159)).toBe('3.14')
    expect(num2(2)).toBe('2')
    expect(count(1_234_567)).toBe('1,234,567')
    expect(count(Number.POSITIVE_INFINITY)).toBe('–')
  })

  it('yesNo reads booleans and the usual strings, passes others through', () => {
    expect(yesNo(true)).toBe('Yes')
    expect(yesNo(false)).toBe('No')
    expect(yesNo('TRUE')).toBe('Yes')
    expect(yesNo('0')).toBe('No')
    expect(yesNo('maybe')).toBe('maybe')
    expect(yesNo('')).toBe('–')
    expect(yesNo(null)).toBe('–')
  })

  it('share: percent of a positive total, 0 otherwise', () => {
    expect(share(25, 200)).toBe(12.5)
    expect(share(1, 0)).toBe(0)
    expect(share(1, -5)).toBe(0)
  })
})

describe('deltaPct and time axes (issue 18)', () => {
  it('drops the decimals from 1,000 % on, so a large change fits its column', () => {
    expect(deltaPct(100, 112.345)).toBe('+12.35 %')
    expect(deltaPct(100, 1099)).toBe('+999.00 %')
    expect(deltaPct(10, 1244.5)).toBe('+12,345 %') // 100 x 1234.5 / 10
    expect(deltaPct(-50, -1050)).toBe('-2,000 %')
    expect(deltaPct(0, 5)).toBe('–')
  })

  it('picks one unit per axis from its largest value and labels ticks in it', () => {
    expect(timeScale(999)).toEqual({ unit: 'us', per: 1 })
    expect(timeScale(43_348_556)).toEqual({ unit: 's', per: 1e6 })
    const ms = timeScale(98_600)
    expect(ms.unit).toBe('ms')
    expect(inScale(12_500, ms)).toBe('12.5')
    expect(inScale(43_348_556, timeScale(43_348_556))).toBe('43.35')
    expect(duration(43_348_556)).toBe('43.35 s')
  })
})
