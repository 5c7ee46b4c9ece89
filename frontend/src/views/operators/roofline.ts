// The roofline chart's option: operators as points (arithmetic intensity, achieved TFLOP/s) on
// log-log axes, under the device's ceilings: min(peak of the dtype, bandwidth x intensity).
import type { EChartsCoreOption } from '../../charts/echarts'
import { escapeHtml, PALETTE } from '../../charts/options'
import type { RooflineDevice, RooflineRow } from './api'

export interface Point {
  name: string
  dtype: string
  intensity: number
  tflops: number
}

/** Rows that can be drawn: known, positive intensity and achieved TFLOP/s. */
export function points(rows: RooflineRow[]): Point[] {
  return rows
    .filter((r) => (r.intensity ?? 0) > 0 && (r.achieved_tflops ?? 0) > 0)
    .map((r) => ({ name: r.name, dtype: r.dtype, intensity: r.intensity as number, tflops: r.achieved_tflops as number }))
}

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
  const dtypes = [...new Set(pts.map((p) => p.dtype))]
  const xs = pts.map((p) => p.intensity)
  const peaks = device?.peak_tflops ?? null
  const tbps = device?.memory_tbps ?? null
  const ridges = peaks && tbps ? dtypes.map((d) => (peaks[d] ?? peaks.fp32 ?? 0) / tbps).filter((r) => r > 0) : []
  const xMin = 10 ** Math.floor(Math.log10(Math.min(...xs, ...ridges, 1) / 2))
  const xMax = 10 ** Math.ceil(Math.log10(Math.max(...xs, ...ridges, 10) * 2))
  const series: unknown[] = dtypes.map((dtype, i) => ({
    name: dtype,
    type: 'scatter',
    symbolSize: 9,
    itemStyle: { color: PALETTE[i % PALETTE.length] },
    data: pts.filter((p) => p.dtype === dtype).map((p) => ({ value: [p.intensity, p.tflops], name: p.name })),
  }))
  if (peaks && tbps) {
    dtypes.forEach((dtype, i) => {
      const peak = peaks[dtype] ?? peaks.fp32
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
