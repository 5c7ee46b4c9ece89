import { describe, expect, it } from 'vitest'
import { ceiling, FLAGGED, flopsReasonText, points, rooflineOption } from './roofline'
import type { RooflineDevice, RooflineRow } from './api'

const row = (name: string, intensity: number | null, tflops: number | null, extra: Partial<RooflineRow> = {}): RooflineRow => ({
  name, dtype: 'bf16', precision: 'bf16', calls: 1, flops: 1, bytes: 1, time_us: 1, achieved_tflops: tflops,
  achieved_tbps: null, intensity, bound: null, peak_tflops: null, estimate: true, mbu_pct: null,
  above_roof: null, flops_reason: null, ...extra,
})

const A100: RooflineDevice = {
  id: 0, name: 'NVIDIA A100', vendor: 'NVIDIA', architecture: 'Ampere (sm_80)', peaks_model: 'A100-40GB',
  matrix_units: 'tensor cores', peak_tflops: { fp32: 19.5, tf32: 156 }, memory_tbps: 1.555, peaks_reason: null,
}
const colors = { text: '#000', muted: '#666', grid: '#eee' }
type Series = { name: string; type: string; data: { value?: [number, number]; name?: string }[] | [number, number][] }

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

  it('draws each point under the roof of its precision, and flagged rows as their own series', () => {
    // an fp32 GEMM that ran as TF32 at 30.7 TFLOP/s: under the tf32 roof (156), not the fp32 one
    const tf32 = row('aten::mm', 100, 30.7, { dtype: 'fp32', precision: 'tf32', peak_tflops: 156 })
    const sgemm = row('aten::addmm', 100, 30.7, { dtype: 'fp32', precision: 'fp32', peak_tflops: 19.5, above_roof: 'precision' })
    const series = (rooflineOption([tf32, sgemm], A100, colors) as { series: Series[] }).series
    const byName = new Map(series.map((s) => [s.name, s]))
    expect((byName.get('tf32')!.data as { name: string }[]).map((d) => d.name)).toEqual(['aten::mm'])
    expect(byName.get('fp32')!.data).toEqual([])  // the flagged sgemm is not a plain fp32 point
    const flagged = byName.get(FLAGGED)!.data as { name: string; value: [number, number] }[]
    expect(flagged.map((d) => d.value)).toEqual([[100, 30.7]])
    expect(flagged[0].name).toContain('faster precision')
    // roofs from the rows' peaks: tf32 bends at 156 / 1.555, fp32 at 19.5 / 1.555
    expect((byName.get('tf32 roof')!.data as [number, number][]).some(([, y]) => y === 156)).toBe(true)
    expect((byName.get('fp32 roof')!.data as [number, number][]).some(([, y]) => y === 19.5)).toBe(true)
  })

  it('is flat when the ridge is left of the range', () => {
    expect(ceiling(10, 100, 1, 10)).toEqual([[1, 10], [10, 10]])
  })

  it('says why FLOPs are unknown, for all calls or some', () => {
    expect(flopsReasonText('stride not recorded', false)).toBe('unknown: stride not recorded')
    expect(flopsReasonText('stride not recorded', true)).toBe('some calls unknown: stride not recorded')
  })
})
