// The roofline chart's option: operators as points (arithmetic intensity, achieved TFLOP/s) on
// log-log axes, under the device's ceilings: min(peak of the precision the operator ran in,
// bandwidth x intensity). Rows the backend flagged above their roof are drawn as their own
// series (a hollow triangle, the reason in the tooltip), never as plain points above the roof.
import type { EChartsCoreOption } from '../../charts/echarts'
import { escapeHtml, PALETTE } from '../../charts/options'
import type { RooflineDevice, RooflineRow } from './api'

export interface Point {
  name: string
  precision: string
  peak: number | null
  flag: string | null
  intensity: number
  tflops: number
}

/** Rows that can be drawn: known, positive intensity and achieved TFLOP/s. */
export function points(rows: RooflineRow[]): Point[] {
  return rows
    .filter((r) => (r.intensity ?? 0) > 0 && (r.achieved_tflops ?? 0) > 0)
    .map((r) => ({
      name: r.name,
      precision: r.precision,
      peak: r.peak_tflops ?? null,
      flag: r.above_roof ?? null,
      intensity: r.intensity as number,
      tflops: r.achieved_tflops as number,
    }))
}

/** What an above-roof flag means, for the tooltip and the table. */
export const ABOVE_ROOF_REASONS: Record<string, string> = {
  algorithmic_flops: 'Winograd/FFT convolution: fewer multiplies than the direct formula counts',
  precision: 'likely ran in a faster precision than the one scored',
  overlap: 'its kernels overlapped other kernels',
  bytes: 'above the bandwidth roof: cache-served bytes counted',
  unknown: 'above every roof: FLOPs formula or timing suspect',
}

export const FLAGGED = 'above roof (excluded from MFU)'

/** The ceiling of one dtype sampled at the x range's ends and its ridge point (TB/s x FLOP/B = TFLOP/s). */
export function ceiling(peak: number, tbps: number, xMin: number, xMax: number): [number, number][] {
  const ridge = peak / tbps
  const line: [number, number][] = [[xMin, Math.min(peak, tbps * xMin)]]
  if (ridge > xMin && ridge < xMax) line.push([ridge, peak])
  line.push([xMax, Math.min(peak, tbps * xMax)])
  return line
}

interface Colors {
  text: string
  muted: string
  grid: string
}

export function rooflineOption(rows: RooflineRow[], device: RooflineDevice | null | undefined, colors: Colors): EChartsCoreOption {
  const pts = points(rows)
  const plain = pts.filter((p) => !p.flag)
  const flagged = pts.filter((p) => p.flag)
  const dtypes = [...new Set(pts.map((p) => p.precision))]
  const peakOf = new Map(pts.filter((p) => p.peak).map((p) => [p.precision, p.peak as number]))
  const xs = pts.map((p) => p.intensity)
  const tbps = device?.peaks_model ? (device?.memory_tbps ?? null) : null
  const ridges = tbps ? dtypes.map((d) => (peakOf.get(d) ?? 0) / tbps).filter((r) => r > 0) : []
  const xMin = 10 ** Math.floor(Math.log10(Math.min(...xs, ...ridges, 1) / 2))
  const xMax = 10 ** Math.ceil(Math.log10(Math.max(...xs, ...ridges, 10) * 2))
  const series: unknown[] = dtypes.map((dtype, i) => ({
    name: dtype,
    type: 'scatter',
    symbolSize: 9,
    itemStyle: { color: PALETTE[i % PALETTE.length] },
    data: plain.filter((p) => p.precision === dtype).map((p) => ({ value: [p.intensity, p.tflops], name: p.name })),
  }))
  if (flagged.length) {
    series.push({
      name: FLAGGED,
      type: 'scatter',
      symbol: 'triangle',
      symbolSize: 11,
      itemStyle: { color: 'transparent', borderColor: colors.text, borderWidth: 1.5 },
      data: flagged.map((p) => ({ value: [p.intensity, p.tflops], name: `${p.name} [${p.precision}]: ${ABOVE_ROOF_REASONS[p.flag as string] ?? p.flag}` })),
    })
  }
  if (tbps) {
    dtypes.forEach((dtype, i) => {
      const peak = peakOf.get(dtype)
      if (!peak) return
      series.push({
        name: `${dtype} roof`,
        type: 'line',
        silent: true,
        symbol: 'none',
        lineStyle: { color: PALETTE[i % PALETTE.length], type: 'dashed', width: 1.5 },
        data: ceiling(peak, tbps, xMin, xMax),
      })
    })
  }
  const axis = (name: string) => ({
    type: 'log',
    name,
    nameLocation: 'middle',
    nameGap: 30,
    nameTextStyle: { color: colors.muted },
    axisLabel: { color: colors.muted },
    splitLine: { lineStyle: { color: colors.grid } },
  })
  return {
    animation: false,
    grid: { left: 70, right: 24, top: 36, bottom: 48 },
    legend: { top: 0, textStyle: { color: colors.text } },
    tooltip: {
      trigger: 'item',
      formatter: (p: { data?: { name?: string; value?: [number, number] }; seriesName?: string }) => {
        const v = p.data?.value
        if (!v) return ''
        return `${escapeHtml(p.data?.name ?? '')} (${escapeHtml(p.seriesName ?? '')})<br/>${v[0].toPrecision(3)} FLOP/B · ${v[1].toPrecision(3)} TFLOP/s`
      },
    },
    xAxis: { ...axis('Arithmetic intensity (FLOP/byte)'), min: xMin, max: xMax },
    yAxis: { ...axis('Achieved TFLOP/s'), nameGap: 52 },
    series,
  }
}

/** The GFLOP cell's note for a row with unknown FLOPs: all calls unknown, or only some (then
 * the sum counts the known calls only). */
export function flopsReasonText(reason: string, some: boolean): string {
  return some ? `some calls unknown: ${reason}` : `unknown: ${reason}`
}
