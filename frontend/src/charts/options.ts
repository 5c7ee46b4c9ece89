// ECharts option builders. Tooltips are HTML, so every string that came from a trace (operator
// and kernel names) goes through escapeHtml first.

import type { Pie } from '../api'
import { duration, pct, share, us } from '../format'
import type { Theme } from '../theme'
import type { EChartsCoreOption } from './echarts'

export const PALETTE = [
  '#1976d2', '#f57c00', '#43a047', '#8e24aa', '#e53935', '#00acc1',
  '#fbc02d', '#6d4c41', '#d81b60', '#3949ab', '#7cb342', '#5e35b1',
]
const OTHER_COLOR = '#9e9e9e'

export const CATEGORY_COLORS: Record<string, string> = {
  Kernel: '#1976d2',
  Memcpy: '#00897b',
  Memset: '#7cb342',
  Communication: '#8e24aa',
  Runtime: '#e53935',
  DataLoader: '#f57c00',
  'CPU Exec': '#fbc02d',
  Other: '#9e9e9e',
}

export function categoryColor(name: string, index: number): string {
  return CATEGORY_COLORS[name] ?? PALETTE[index % PALETTE.length]
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}

interface Colors {
  text: string
  muted: string
  grid: string
  tooltipBg: string
  tooltipBorder: string
  surface: string
}

export function chartColors(theme: Theme): Colors {
  return theme === 'dark'
    ? { text: '#e8eaed', muted: '#9aa0a6', grid: '#3c4043', tooltipBg: '#35363a', tooltipBorder: '#5f6368', surface: '#292a2d' }
    : { text: '#202124', muted: '#5f6368', grid: '#e0e0e0', tooltipBg: '#ffffff', tooltipBorder: '#dadce0', surface: '#ffffff' }
}

export function tooltipBase(c: Colors) {
  return {
    backgroundColor: c.tooltipBg,
    borderColor: c.tooltipBorder,
    textStyle: { color: c.text, fontFamily: 'Roboto, system-ui, sans-serif', fontSize: 12 },
    extraCssText: 'box-shadow: 0 2px 8px rgba(0,0,0,.2); border-radius: 4px;',
    confine: true,
  }
}

export const FONT = 'Roboto, "Helvetica Neue", Arial, sans-serif'

/** A donut with a scrollable legend on the right. */
export function donutOption(
  pie: Pie,
  theme: Theme,
  opts: { colors?: string[]; unit?: 'us' | 'ratio'; otherLabel?: string; legendWidth?: number } = {},
): EChartsCoreOption {
  const c = chartColors(theme)
  const data = pie.slices.map((s, i) => ({
    name: s.name,
    value: s.value,
    itemStyle: { color: opts.colors?.[i] ?? PALETTE[i % PALETTE.length] },
  }))
  if (pie.other > 0) data.push({ name: opts.otherLabel ?? 'Other', value: pie.other, itemStyle: { color: OTHER_COLOR } })
  const total = data.reduce((acc, d) => acc + d.value, 0)
  return {
    textStyle: { fontFamily: FONT },
    tooltip: {
      ...tooltipBase(c),
      trigger: 'item',
      formatter: (p: { name: string; value: number; marker: string }) => {
        const value = opts.unit === 'ratio' ? pct(share(p.value, total)) : `${us(p.value)} us`
        return `<div style="max-width:420px;white-space:normal;word-break:break-all">${p.marker}${escapeHtml(p.name)}</div><b>${value}</b>${opts.unit === 'ratio' ? '' : ` &middot; ${pct(share(p.value, total))}`}`
      },
    },
    legend: {
      type: 'scroll',
      orient: 'vertical',
      left: '56%',
      right: 0,
      top: 'middle',
      itemWidth: 10,
      itemHeight: 10,
      icon: 'circle',
      textStyle: { color: c.text, fontSize: 12, overflow: 'truncate', ellipsis: '…', width: opts.legendWidth ?? 180 },
      pageTextStyle: { color: c.muted },
      pageIconColor: c.text,
      pageIconInactiveColor: c.grid,
      tooltip: { show: true },
    },
    series: [
      {
        type: 'pie',
        radius: ['45%', '75%'],
        center: ['27%', '50%'],
        avoidLabelOverlap: true,
        label: { show: false },
        labelLine: { show: false },
        itemStyle: { borderColor: c.surface, borderWidth: 1 },
        emphasis: { scale: true, scaleSize: 4 },
        data,
      },
    ],
  }
}

export interface StepSeries {
  steps: { name: string; total: number; values: Record<string, number> }[]
  categories: string[]
}

/** Stacked bars: one per step, one stack segment per breakdown category. */
export function stepsOption(data: StepSeries, theme: Theme): EChartsCoreOption {
  const c = chartColors(theme)
  const names = data.steps.map((s) => s.name)
  return {
    textStyle: { fontFamily: FONT },
    grid: { left: 8, right: 16, top: 40, bottom: 32, containLabel: true },
    legend: { top: 0, left: 0, itemWidth: 12, itemHeight: 12, itemGap: 16, textStyle: { color: c.text }, icon: 'roundRect' },
    tooltip: {
      ...tooltipBase(c),
      trigger: 'axis',
      axisPointer: { type: 'shadow' },
      formatter: (params: { dataIndex: number; seriesName: string; value: number; marker: string }[]) => {
        if (!params.length) return ''
        const step = data.steps[params[0].dataIndex]
        const rows = params
          .filter((p) => p.value > 0)
          .reverse()
          .map((p) => `<tr><td>${p.marker}${escapeHtml(p.seriesName)}</td><td style="text-align:right;padding-left:16px">${us(p.value)} us</td><td style="text-align:right;padding-left:12px">${pct(share(p.value, step.total))}</td></tr>`)
          .join('')
        return `<div style="font-weight:500;margin-bottom:4px">Step ${escapeHtml(step.name)} &middot; ${us(step.total)} us (${duration(step.total)})</div><table style="border-spacing:0;font-size:12px">${rows}</table>`
      },
    },
    xAxis: {
      type: 'category',
      data: names,
      axisLabel: { color: c.muted },
      axisLine: { lineStyle: { color: c.grid } },
      axisTick: { show: false },
    },
    yAxis: {
      type: 'value',
      axisLabel: { color: c.muted, formatter: (v: number) => us(v) },
      splitLine: { lineStyle: { color: c.grid } },
    },
    series: data.categories.map((cat, i) => ({
      name: cat,
      type: 'bar',
      stack: 'total',
      barMaxWidth: 56,
      itemStyle: { color: categoryColor(cat, i) },
      data: data.steps.map((s) => s.values[cat] ?? 0),
    })),
  }
}
