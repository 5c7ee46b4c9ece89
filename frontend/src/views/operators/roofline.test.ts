import { describe, expect, it } from 'vitest'
import { ceiling, flopsReasonText, points } from './roofline'
import type { RooflineRow } from './api'

const row = (name: string, intensity: number | null, tflops: number | null): RooflineRow => ({
  name, dtype: 'bf16', calls: 1, flops: 1, bytes: 1, time_us: 1, achieved_tflops: tflops,
  achieved_tbps: null, intensity, bound: null, peak_tflops: null, estimate: true, flops_reason: null,
})

describe('roofline', () => {
  it('draws only rows with a positive intensity and throughput', () => {
    expect(points([row('mm', 885, 547), row('view', null, null), row('add', 0.08, 0)]).map((p) => p.name)).toEqual(['mm'])
  })

  it('bends at the ridge point: MI300X bf16 1307.4 TFLOP/s over 5.3 TB/s', () => {
    const line = ceiling(1307.4, 5.3, 0.1, 10000)
    expect(line[0]).toEqual([0.1, 0.53])
    expect(line[1][0]).toBeCloseTo(1307.4 / 5.3)
    expect(line[1][1]).toBe(1307.4)
    expect(line[2]).toEqual([10000, 1307.4])
  })

  it('is flat when the ridge is left of the range', () => {
    expect(ceiling(10, 100, 1, 10)).toEqual([[1, 10], [10, 10]])
  })

  it('says why FLOPs are unknown, for all calls or some', () => {
    expect(flopsReasonText('stride not recorded', false)).toBe('unknown: stride not recorded')
    expect(flopsReasonText('stride not recorded', true)).toBe('some calls unknown: stride not recorded')
  })
})
