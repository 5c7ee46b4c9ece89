// ECharts options of the Memory view: the allocated/reserved step curves (zoomable, peak and
// capacity marks) and the stacked memory-timeline categories.
import { FONT, PALETTE, chartColors, escapeHtml, tooltipBase } from '../../charts/options'
import type { EChartsCoreOption } from '../../charts/echarts'
import type { Theme } from '../../theme'
import { bytes, bytesInterval, msText } from '../../format'

export interface CurvePoints {
  /** ms since the profile start */
  t: number[]
  allocated: number[]
  reserved: (number | null)[]
}

export interface CurveMarks {
  peak: { t: number; bytes: number } | null
  capacity: number | null
  showCapacity: boolean
}

/** [start, end] of the x axis in ms, or null for everything. */
export type MsRange = [number, number] | null

/**
 * Tick labels of a time axis spanning `spanMs`: seconds from 10 s up, else ms, with as many
 * decimals as the span needs (never "10001031.92"): 2.5 ms -> 2 decimals, 800 ms -> 0.
 */
export function timeTickLabel(spanMs: number): (valueMs: number) => string {
  const seconds = spanMs >= 10_000
  const span = seconds ? spanMs / 1000 : spanMs
  const decimals = span > 0 ? Math.min(3, Math.max(0, 2 - Math.floor(Math.log10(span)))) : 0
  const fmt = new Intl.NumberFormat('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals })
  return (v: number) => `${fmt.format(seconds ? v / 1000 : v)} ${seconds ? 's' : 'ms'}`
}

export function spanOf(t: number[], range: MsRange): number {
  if (range) return range[1] - range[0]
  return t.length ? t[t.length - 1] - t[0] : 0
}

export function timeAxis(theme: Theme, spanMs: number, name = 'Time since profile start') {
  const c = chartColors(theme)
  return {
    type: 'value',
    name,
    nameLocation: 'middle',
    nameGap: 28,
    nameTextStyle: { color: c.muted, fontSize: 12 },
    min: 'dataMin',
    max: 'dataMax',
    axisLabel: { color: c.muted, hideOverlap: true, formatter: timeTickLabel(spanMs) },
    axisLine: { lineStyle: { color: c.grid } },
    splitLine: { show: false },
  }
}

export function bytesAxis(theme: Theme, top: number, max?: number) {
  const c = chartColors(theme)
  const interval = bytesInterval(max ?? top)
  return {
    type: 'value',
    // without a fixed max, round the top up to a whole tick so the last label is a round size
    max: max ?? (interval ? (extent: { max: number }) => Math.max(interval, Math.ceil(extent.max / interval) * interval) : undefined),
    interval,
    axisLabel: { color: c.muted, formatter: (v: number) => bytes(v) },
    splitLine: { lineStyle: { color: c.grid } },
  }
}

export function zoom(range: MsRange, theme: Theme) {
  const c = chartColors(theme)
  const window = range ? { startValue: range[0], endValue: range[1] } : { start: 0, end: 100 }
  return [
    { type: 'inside', xAxisIndex: 0, filterMode: 'none', zoomOnMouseWheel: 'shift', moveOnMouseMove: false, moveOnMouseWheel: false, ...window },
    {
      type: 'slider',
      xAxisIndex: 0,
      filterMode: 'none',
      height: 22,
      bottom: 8,
      brushSelect: true,
      borderColor: c.grid,
      textStyle: { color: c.muted, fontSize: 11 },
      labelFormatter: (v: number) => `${msText(v * 1000)} ms`,
      ...window,
    },
  ]
}

export function curveOption(points: CurvePoints, marks: CurveMarks, range: MsRange, theme: Theme): EChartsCoreOption {
  const c = chartColors(theme)
  const allocated = points.t.map((t, i) => [t, points.allocated[i]])
  const hasReserved = points.reserved.some((v) => v !== null && Number.isFinite(v))
  const reserved = hasReserved ? points.t.map((t, i) => [t, points.reserved[i]]) : []
  const capacity = marks.capacity && marks.showCapacity ? marks.capacity : null
  return {
    animation: false,
    textStyle: { fontFamily: FONT },
    grid: { left: 8, right: 24, top: 40, bottom: 76, containLabel: true },
    legend: { top: 0, left: 0, itemWidth: 14, itemHeight: 8, textStyle: { color: c.text }, data: hasReserved ? ['Allocated', 'Reserved'] : ['Allocated'] },
    tooltip: {
      ...tooltipBase(c),
      trigger: 'axis',
      axisPointer: { type: 'line', lineStyle: { color: c.muted } },
      formatter: (params: { seriesName: string; value: [number, number | null]; marker: string }[]) => {
        if (!params.length) return ''
        const rows = params
          .map((p) => `<tr><td>${p.marker}${escapeHtml(p.seriesName)}</td><td style="text-align:right;padding-left:16px">${bytes(p.value[1])}</td></tr>`)
          .join('')
        return `<div style="font-weight:500;margin-bottom:4px">${msText(params[0].value[0] * 1000)} ms</div><table style="border-spacing:0;font-size:12px">${rows}</table>`
      },
    },
    xAxis: timeAxis(theme, spanOf(points.t, range)),
    yAxis: bytesAxis(theme, Math.max(maxOf(points.allocated), maxOf(reservedValues(points))), capacity ? capacity * 1.04 : undefined),
    dataZoom: zoom(range, theme),
    series: [
      {
        name: 'Allocated',
        type: 'line',
        data: allocated,
        showSymbol: false,
        lineStyle: { width: 1.5, color: PALETTE[0] },
        itemStyle: { color: PALETTE[0] },
        areaStyle: { color: PALETTE[0], opacity: 0.12 },
        markPoint: marks.peak
          ? {
              symbol: 'pin',
              symbolSize: 44,
              itemStyle: { color: '#e53935' },
              label: { color: '#fff', fontSize: 10, formatter: () => 'Peak' },
              data: [{ name: 'Peak', coord: [marks.peak.t, marks.peak.bytes] }],
              tooltip: { formatter: () => `Peak allocated: <b>${bytes(marks.peak!.bytes)}</b> at ${msText(marks.peak!.t * 1000)} ms` },
            }
          : undefined,
        markLine: capacity
          ? {
              symbol: 'none',
              silent: true,
              lineStyle: { color: '#e53935', type: 'dashed', width: 1.5 },
              label: { position: 'insideEndTop', color: '#e53935', formatter: () => `Device capacity ${bytes(capacity)}` },
              data: [{ yAxis: capacity }],
            }
          : undefined,
      },
      ...(hasReserved
        ? [
            {
              name: 'Reserved',
              type: 'line',
              data: reserved,
              showSymbol: false,
              lineStyle: { width: 1.5, color: PALETTE[1], type: 'dashed' },
              itemStyle: { color: PALETTE[1] },
            },
          ]
        : []),
    ],
  }
}

export function maxOf(values: number[]): number {
  let max = 0
  for (const v of values) if (v > max) max = v
  return max
}

function reservedValues(points: CurvePoints): number[] {
  return points.reserved.filter((v): v is number => v !== null && Number.isFinite(v))
}

function totals(t: number[], series: { values: number[] }[]): number[] {
  return t.map((_, i) => series.reduce((acc, s) => acc + (s.values[i] ?? 0), 0))
}

/** Category colours after torch's memory_timeline plot, adjusted for both themes. */
export const CATEGORY_COLORS: Record<string, string> = {
  PARAMETER: '#2e7d32',
  OPTIMIZER_STATE: '#f9a825',
  INPUT: '#546e7a',
  TEMPORARY: '#9575cd',
  ACTIVATION: '#e53935',
  GRADIENT: '#1e40af',
  AUTOGRAD_DETAIL: '#42a5f5',
  UNKNOWN: '#9e9e9e',
}

export function categoryLabel(name: string): string {
  return name.charAt(0) + name.slice(1).toLowerCase().replace(/_/g, ' ')
}

export function timelineOption(t: number[], series: { name: string; values: number[] }[], range: MsRange, theme: Theme): EChartsCoreOption {
  const c = chartColors(theme)
  return {
    animation: false,
    textStyle: { fontFamily: FONT },
    grid: { left: 8, right: 24, top: 48, bottom: 40, containLabel: true },
    legend: { top: 0, left: 0, itemWidth: 12, itemHeight: 12, icon: 'roundRect', textStyle: { color: c.text } },
    tooltip: {
      ...tooltipBase(c),
      trigger: 'axis',
      axisPointer: { type: 'line', lineStyle: { color: c.muted } },
      formatter: (params: { seriesName: string; value: [number, number]; marker: string }[]) => {
        if (!params.length) return ''
        const total = params.reduce((acc, p) => acc + (p.value[1] ?? 0), 0)
        const rows = params
          .filter((p) => p.value[1] > 0)
          .reverse()
          .map((p) => `<tr><td>${p.marker}${escapeHtml(p.seriesName)}</td><td style="text-align:right;padding-left:16px">${bytes(p.value[1])}</td></tr>`)
          .join('')
        return `<div style="font-weight:500;margin-bottom:4px">${msText(params[0].value[0] * 1000)} ms &middot; ${bytes(total)}</div><table style="border-spacing:0;font-size:12px">${rows}</table>`
      },
    },
    xAxis: timeAxis(theme, spanOf(t, range)),
    yAxis: bytesAxis(theme, maxOf(totals(t, series))),
    dataZoom: [{ type: 'inside', xAxisIndex: 0, filterMode: 'none', zoomOnMouseWheel: 'shift', ...(range ? { startValue: range[0], endValue: range[1] } : { start: 0, end: 100 }) }],
    series: series.map((s) => ({
      name: categoryLabel(s.name),
      type: 'line',
      stack: 'total',
      step: 'end',
      showSymbol: false,
      lineStyle: { width: 0 },
      itemStyle: { color: CATEGORY_COLORS[s.name] ?? PALETTE[0] },
      areaStyle: { color: CATEGORY_COLORS[s.name] ?? PALETTE[0], opacity: 0.85 },
      emphasis: { focus: 'series' },
      data: t.map((x, i) => [x, s.values[i] ?? 0]),
    })),
  }
}
