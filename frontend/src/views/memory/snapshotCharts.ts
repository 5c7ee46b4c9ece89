// ECharts option of the allocator-snapshot curve: allocated/reserved (level of detail from the
// server), the trace's own allocated curve on the same time axis when the snapshot covers the
// span, profiler steps as bands, the peak, OOMs and the inspected instant as marks.
import { FONT, PALETTE, chartColors, escapeHtml, tooltipBase } from '../../charts/options'
import type { EChartsCoreOption } from '../../charts/echarts'
import type { Theme } from '../../theme'
import { bytes } from '../../format'
import { bytesAxis, maxOf, spanOf, timeAxis, timeTickLabel, zoom, type CurvePoints, type MsRange } from './charts'

export interface SnapshotMarks {
  peak: [number, number] | null
  at: number | null
  ooms: number[]
  steps: { name: string; start: number; end: number }[]
}

export function snapshotOption(
  points: { t: number[]; allocated: number[]; reserved: number[] },
  overlay: { label: string; points: CurvePoints } | null,
  marks: SnapshotMarks,
  range: MsRange,
  theme: Theme,
  byEntry: boolean,
): EChartsCoreOption {
  const c = chartColors(theme)
  const span = spanOf(points.t, range)
  const xLabel = byEntry ? (v: number) => `#${Math.round(v)}` : timeTickLabel(span)
  const xAxis = byEntry
    ? { ...timeAxis(theme, span, 'Allocator entry (the snapshot has no times)'), axisLabel: { color: c.muted, hideOverlap: true, formatter: xLabel } }
    : timeAxis(theme, span, overlay || marks.steps.length ? 'Time since profile start' : 'Time since the snapshot’s first entry')
  const top = Math.max(maxOf(points.allocated), maxOf(points.reserved), overlay ? maxOf(overlay.points.allocated) : 0)
  const lines = [
    ...(marks.at !== null ? [{ xAxis: marks.at, lineStyle: { color: c.text, type: 'solid', width: 1 }, label: { formatter: () => 'segments shown' } }] : []),
    ...marks.ooms.map((x) => ({ xAxis: x, lineStyle: { color: '#e53935', type: 'dashed', width: 1.5 }, label: { formatter: () => 'OOM' } })),
  ]
  return {
    animation: false,
    textStyle: { fontFamily: FONT },
    grid: { left: 8, right: 24, top: 40, bottom: 76, containLabel: true },
    legend: { top: 0, left: 0, itemWidth: 14, itemHeight: 8, textStyle: { color: c.text } },
    tooltip: {
      ...tooltipBase(c),
      trigger: 'axis',
      axisPointer: { type: 'line', lineStyle: { color: c.muted } },
      formatter: (params: { seriesName: string; value: [number, number | null]; marker: string }[]) => {
        if (!params.length) return ''
        const rows = params
          .map((p) => `<tr><td>${p.marker}${escapeHtml(p.seriesName)}</td><td style="text-align:right;padding-left:16px">${bytes(p.value[1])}</td></tr>`)
          .join('')
        return `<div style="font-weight:500;margin-bottom:4px">${escapeHtml(xLabel(params[0].value[0]))}</div><table style="border-spacing:0;font-size:12px">${rows}</table>`
      },
    },
    xAxis,
    yAxis: bytesAxis(theme, top),
    dataZoom: zoom(range, theme).map((z) => (z.type === 'slider' ? { ...z, labelFormatter: xLabel } : z)),
    series: [
      {
        name: 'Allocated',
        type: 'line',
        data: points.t.map((t, i) => [t, points.allocated[i]]),
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
              data: [{ name: 'Peak', coord: marks.peak }],
            }
          : undefined,
        markLine: lines.length ? { symbol: 'none', silent: true, data: lines, label: { position: 'insideEndTop', color: c.muted } } : undefined,
        markArea: marks.steps.length
          ? {
              silent: true,
              itemStyle: { color: c.grid, opacity: 0.35 },
              label: { color: c.muted, fontSize: 10, position: 'insideTop' },
              data: marks.steps.filter((_, i) => i % 2 === 0).map((s) => [{ xAxis: s.start, name: `step ${s.name}` }, { xAxis: s.end }]),
            }
          : undefined,
      },
      {
        name: 'Reserved',
        type: 'line',
        data: points.t.map((t, i) => [t, points.reserved[i]]),
        showSymbol: false,
        lineStyle: { width: 1.5, color: PALETTE[1], type: 'dashed' },
        itemStyle: { color: PALETTE[1] },
      },
      ...(overlay
        ? [
            {
              name: overlay.label,
              type: 'line',
              data: overlay.points.t.map((t, i) => [t, overlay.points.allocated[i]]),
              showSymbol: false,
              lineStyle: { width: 1, color: PALETTE[3], type: 'dotted' },
              itemStyle: { color: PALETTE[3] },
            },
          ]
        : []),
    ],
  }
}
