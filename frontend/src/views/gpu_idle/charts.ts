// ECharts options of the GPU Idle view: stacked bars (per GPU, stream or step), log-bin
// histograms and step-function time series. Names from the trace go through escapeHtml.
import type { EChartsCoreOption } from '../../charts/echarts'
import { FONT, chartColors, escapeHtml, tooltipBase } from '../../charts/options'
import { duration, pct, share, us } from '../../format'
import type { Theme } from '../../theme'
import type { Histogram } from './api'

export interface Part {
  key: string
  label: string
  color: string
}

/** One bar per row (a GPU, a stream, a step), stacked by `parts`; values in us. */
export function stackedBars(rows: string[], parts: readonly Part[], values: Record<string, number>[], theme: Theme): EChartsCoreOption {
  const c = chartColors(theme)
  return {
    animation: false,
    textStyle: { fontFamily: FONT },
    grid: { left: 8, right: 24, top: 36, bottom: 8, containLabel: true },
    legend: { top: 0, left: 0, itemWidth: 12, itemHeight: 12, icon: 'roundRect', textStyle: { color: c.text } },
    tooltip: {
      trigger: 'axis',
      axisPointer: { type: 'shadow' },
      ...tooltipBase(c),
      formatter: (params: { dataIndex: number; seriesName: string; value: number; marker: string }[]) => {
        if (!params.length) return ''
        const total = params.reduce((acc, p) => acc + (p.value ?? 0), 0)
        const lines = params
          .map((p) => `<tr><td>${p.marker}${escapeHtml(p.seriesName)}</td><td style="text-align:right;padding-left:16px">${us(p.value)} us</td><td style="text-align:right;padding-left:12px">${pct(share(p.value, total))}</td></tr>`)
          .join('')
        return `<div style="font-weight:500;margin-bottom:4px">${escapeHtml(rows[params[0].dataIndex])} &middot; ${duration(total)}</div><table style="border-spacing:0;font-size:12px">${lines}</table>`
      },
    },
    yAxis: { type: 'category', data: rows, inverse: true, axisLabel: { color: c.muted }, axisTick: { show: false }, axisLine: { lineStyle: { color: c.grid } } },
    xAxis: { type: 'value', axisLabel: { color: c.muted, formatter: (v: number) => us(v) }, splitLine: { lineStyle: { color: c.grid } } },
    series: parts.map((p) => ({
      name: p.label,
      type: 'bar',
      stack: 'total',
      barMaxWidth: 28,
      itemStyle: { color: p.color },
      data: values.map((v) => v[p.key] ?? 0),
    })),
  }
}

/** "0.1–0.32 us" style labels of log bins. */
export function binLabels(hist: Histogram): string[] {
  return hist.counts.map((_, i) => `${us(hist.edges_us[i])}–${us(hist.edges_us[i + 1])}`)
}

/** A histogram of log-spaced bins (counts per bin). */
export function histogramOption(hist: Histogram, label: string, color: string, theme: Theme): EChartsCoreOption {
  const c = chartColors(theme)
  return {
    animation: false,
    textStyle: { fontFamily: FONT },
    grid: { left: 8, right: 16, top: 16, bottom: 8, containLabel: true },
    tooltip: { trigger: 'axis', axisPointer: { type: 'shadow' }, ...tooltipBase(c) },
    xAxis: { type: 'category', data: binLabels(hist), name: `${label} (us)`, nameLocation: 'middle', nameGap: 28, axisLabel: { color: c.muted, fontSize: 10 }, axisLine: { lineStyle: { color: c.grid } } },
    yAxis: { type: 'value', name: 'count', axisLabel: { color: c.muted }, splitLine: { lineStyle: { color: c.grid } } },
    series: [{ name: label, type: 'bar', data: hist.counts, itemStyle: { color }, barCategoryGap: '10%' }],
  }
}

/** Step-function series over trace time, shown relative to `origin` in ms. */
export function timeSeriesOption(origin: number, lines: { name: string; t: number[]; v: number[] }[], yName: string, theme: Theme, step = true): EChartsCoreOption {
  const c = chartColors(theme)
  return {
    animation: false,
    textStyle: { fontFamily: FONT },
    grid: { left: 8, right: 24, top: 36, bottom: 8, containLabel: true },
    legend: { top: 0, left: 0, type: 'scroll', textStyle: { color: c.text } },
    tooltip: { trigger: 'axis', ...tooltipBase(c) },
    xAxis: { type: 'value', name: 'ms', axisLabel: { color: c.muted }, splitLine: { show: false }, axisLine: { lineStyle: { color: c.grid } } },
    yAxis: { type: 'value', name: yName, axisLabel: { color: c.muted }, splitLine: { lineStyle: { color: c.grid } } },
    series: lines.map((l) => ({
      name: l.name,
      type: 'line',
      step: step ? 'end' : undefined,
      showSymbol: false,
      sampling: 'lttb',
      data: l.t.map((t, i) => [(t - origin) / 1000, l.v[i]]),
    })),
  }
}
