// Distributed view (run level, all workers of a span): devices per node/process, per-step
// computation/communication overlap, data transfer vs synchronizing, comm-op statistics.
import { useCallback, useMemo, useState } from 'react'
import type { Selection } from '../../api'
import { Chart } from '../../charts/Chart'
import type { EChartsCoreOption } from '../../charts/echarts'
import { FONT, chartColors, escapeHtml, timeValueAxis, tooltipBase } from '../../charts/options'
import { DataTable, type Column, type SortState } from '../../components/DataTable'
import { Banner, Card, DownloadLink, Empty, Field, Select } from '../../components/ui'
import { bytes, count, duration, num2, pct, share, us } from '../../format'
import { useAsync } from '../../hooks'
import type { Theme } from '../../theme'
import { useViewStyle } from '../../components/style'
import { distributedCsvUrl, fetchDistributed, type CommOpRow, type DistributedDevice, type DistributedPayload } from './api'
import css from './distributed.css?inline'
import { Async } from '../../components/Async'
import { BandwidthCard, ClockNotes, CollectivesCard, CoverageBanner, HeatMapCard, StragglersCard } from './CrossRank'
import { ProcessGroupsCard } from './ProcessGroups'
import { RanksTimeline } from '../ranks/RanksTimeline'
import { FsdpLayersCard } from './FsdpLayers'

/** All ranks on one timeline: opened on request (it reads the chosen ranks' trace indexes). */
function RanksCard({ data, run, span, theme }: { data: DistributedPayload; run: string; span: string; theme: Theme }) {
  const [open, setOpen] = useState(false)
  const choices = data.devices.map((d, i) => ({ rank: d.rank ?? i, worker: d.worker })).sort((a, b) => a.rank - b.rank)
  return (
    <Card
      title="All ranks on one timeline"
      subtitle="GPU streams of chosen ranks on one clock (offsets estimated from collective ends), matched collectives linked across ranks"
      testId="dist-ranks"
      actions={
        <button type="button" className="button compact" onClick={() => setOpen(!open)} data-testid="dist-ranks-toggle">
          {open ? 'Hide' : 'Show the timeline'}
        </button>
      }
    >
      {open ? <RanksTimeline run={run} span={span} choices={choices} theme={theme} /> : null}
    </Card>
  )
}

interface Props {
  selection: Selection
  theme: Theme
}

export function DistributedView({ selection, theme }: Props) {
  useViewStyle('distributed', css)
  const state = useAsync('distributed', `${selection.run}\u0000${selection.span}`, (signal) => fetchDistributed(selection.run, selection.span, signal))
  return (
    <Async state={state} what="the distributed view" label="Loading all workers">
      {(data) => <DistributedContent data={data} theme={theme} csvUrl={distributedCsvUrl(selection.run, selection.span)} run={selection.run} span={selection.span} />}
    </Async>
  )
}

const OVERLAP_SERIES = [
  { key: 'computation', label: 'Computation', color: '#1976d2', hint: 'Computation not overlapped by communication' },
  { key: 'overlap', label: 'Overlapping', color: '#43a047', hint: 'Computation and communication at the same time' },
  { key: 'communication', label: 'Communication', color: '#8e24aa', hint: 'Communication not overlapped by computation' },
  { key: 'other', label: 'Other', color: '#9e9e9e', hint: 'Neither (host work, idle, data loading...)' },
] as const

const WAIT_SERIES = [
  { key: 'transfer', label: 'Data transfer', color: '#00897b', hint: 'The shortest duration of each collective over the workers' },
  { key: 'synchronizing', label: 'Synchronizing', color: '#f57c00', hint: 'The rest: waiting for the other workers' },
  { key: 'unmatched', label: 'Unmatched', color: '#9e9e9e', hint: 'Collectives seen on this rank only (ranks missing): neither transfer nor wait' },
] as const

function DistributedContent({ data, theme, csvUrl, run, span }: { data: DistributedPayload; theme: Theme; csvUrl: string; run: string; span: string }) {
  const nodes = new Set(data.devices.map((d) => d.node)).size
  const backends = [...new Set(data.devices.map((d) => d.backend).filter(Boolean))].join(', ')
  const anyComm = data.workers.some((w) => (data.comm_ops[w]?.rows.length ?? 0) > 0)
  return (
    <div className="view distributed" data-testid="distributed-view">
      <CoverageBanner data={data} />
      {data.messages.length > 0 && (
        <Banner kind="warning" title="Communication warnings" testId="dist-messages">
          <ul className="messages">
            {data.messages.slice(0, 30).map((m, i) => (
              <li key={i}>{m}</li>
            ))}
            {data.messages.length > 30 && <li>… and {count(data.messages.length - 30)} more</li>}
          </ul>
        </Banner>
      )}
      <Card
        title="Devices and processes"
        subtitle={`${count(data.workers.length)} worker${data.workers.length === 1 ? '' : 's'} on ${count(nodes)} node${nodes === 1 ? '' : 's'}${backends ? ` · backend ${backends}` : ''}`}
        testId="dist-devices"
      >
        <DeviceTable devices={data.devices} />
      </Card>
      {!anyComm ? (
        <Card title="Communication" testId="dist-no-comm">
          <Empty title="No communication ops in this span">
            The workers recorded no collective (NCCL, Gloo, MPI...) calls; run with torch.distributed and profile every rank to compare them.
          </Empty>
        </Card>
      ) : null}
      <div className="grid two">
        <StackedCard
          title="Computation / communication overlap"
          subtitle="Per worker, us; exclusive parts of each step"
          byStep={data.overlap}
          steps={data.steps}
          workers={data.workers}
          series={OVERLAP_SERIES}
          theme={theme}
          testId="dist-overlap"
        />
        <StackedCard
          title="Data transfer vs synchronizing"
          subtitle="Communication time per worker, us; per step it adds up to the overlap chart's communication"
          byStep={data.wait}
          steps={data.steps}
          workers={data.workers}
          series={WAIT_SERIES}
          theme={theme}
          testId="dist-wait"
        />
      </div>
      <ClockNotes data={data} />
      {anyComm && <RanksCard data={data} run={run} span={span} theme={theme} />}
      {anyComm && (
        <>
          <StragglersCard data={data} />
          <ProcessGroupsCard data={data} />
          <HeatMapCard data={data} theme={theme} />
          <CollectivesCard data={data} fileName="collectives.csv" />
          <BandwidthCard rows={data.bandwidth} />
          <FsdpLayersCard data={data} />
        </>
      )}
      <CommOpsCard data={data} csvUrl={csvUrl} />
    </div>
  )
}

function DeviceTable({ devices }: { devices: DistributedDevice[] }) {
  const anyGpu = devices.some((d) => d.gpus.length > 0)
  // a CUDA compute capability only where some GPU has one (never on AMD)
  const anyCc = devices.some((d) => d.gpus.some((g) => g.compute_capability != null))
  return (
    <table className="simple-table dist-device-table" data-testid="dist-device-table">
      <thead>
        <tr>
          <th>Node</th>
          <th>Process</th>
          <th>Worker</th>
          <th>Backend</th>
          <th className="right">Rank</th>
          <th className="right">World size</th>
          {anyGpu && <th>GPU</th>}
          {anyGpu && <th className="right">Memory</th>}
          {anyCc && <th className="right">Compute capability</th>}
        </tr>
      </thead>
      <tbody>
        {devices.flatMap((d) => {
          const gpus = d.gpus.length ? d.gpus : [null]
          return gpus.map((g, i) => (
            <tr key={`${d.worker}\u0000${i}`} data-worker={d.worker}>
              {i === 0 && (
                <>
                  <td rowSpan={gpus.length}>{d.node}</td>
                  <td rowSpan={gpus.length} className="mono">
                    {d.pid}
                  </td>
                  <td rowSpan={gpus.length}>{d.worker}</td>
                  <td rowSpan={gpus.length}>{d.backend ?? '–'}</td>
                  <td rowSpan={gpus.length} className="right">
                    {d.rank ?? '–'}
                  </td>
                  <td rowSpan={gpus.length} className="right">
                    {d.world_size ?? '–'}
                  </td>
                </>
              )}
              {anyGpu && <td>{g ? `GPU ${g.id}${g.name ? ` · ${g.name}` : ''}` : <span className="muted">none</span>}</td>}
              {anyGpu && <td className="right">{g?.memory_bytes ? bytes(g.memory_bytes) : '–'}</td>}
              {anyCc && <td className="right">{g?.compute_capability ?? '–'}</td>}
            </tr>
          ))
        })}
      </tbody>
    </table>
  )
}

// ---------------------------------------------------------------------------------------------

interface SeriesSpec {
  readonly key: string
  readonly label: string
  readonly color: string
  readonly hint: string
}

const NONE = {}

function stepOptions(steps: string[]) {
  return [{ value: 'all', label: 'All steps (mean)' }, ...steps.map((s) => ({ value: s, label: /^\d+$/.test(s) ? `Step ${s}` : s }))]
}

function StackedCard<V extends object>({
  title,
  subtitle,
  byStep,
  steps,
  workers,
  series,
  theme,
  testId,
}: {
  title: string
  subtitle: string
  byStep: Record<string, Record<string, V>>
  steps: string[]
  workers: string[]
  series: readonly SeriesSpec[]
  theme: Theme
  testId: string
}) {
  const [step, setStep] = useState('all')
  const values = (byStep[step] ?? NONE) as Record<string, Record<string, number>>
  const shown = useMemo(() => workers.filter((w) => w in values), [workers, values])
  const option = useMemo(() => stackedOption(shown, series, values, theme), [shown, series, values, theme])
  return (
    <Card
      title={title}
      subtitle={subtitle}
      actions={
        <div className="dist-step">
          <Field label="Step">{(id) => <Select id={id} value={step} onChange={setStep} options={stepOptions(steps)} testId={`${testId}-step`} />}</Field>
        </div>
      }
      testId={testId}
    >
      {shown.length === 0 ? (
        <Empty title="No data for this step" />
      ) : (
        <>
          <Chart option={option} height={300} label={title} testId={`${testId}-chart`} />
          <table className="simple-table dist-values" data-testid={`${testId}-table`}>
            <thead>
              <tr>
                <th>Worker</th>
                {series.map((s) => (
                  <th key={s.key} className="right" title={s.hint}>
                    <span className="swatch" style={{ background: s.color }} />
                    {s.label}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {shown.map((w) => {
                const v = values[w]
                return (
                  <tr key={w} data-worker={w}>
                    <td className="dist-worker-cell" title={w}>
                      {w}
                    </td>
                    {series.map((s) => (
                      <td key={s.key} className="right" data-col={s.key}>
                        {us(v[s.key])}
                      </td>
                    ))}
                  </tr>
                )
              })}
            </tbody>
          </table>
        </>
      )}
    </Card>
  )
}

function stackedOption(workers: string[], series: readonly SeriesSpec[], values: Record<string, Record<string, number>>, theme: Theme): EChartsCoreOption {
  const c = chartColors(theme)
  const many = workers.length > 12
  const maxTotal = Math.max(0, ...workers.map((w) => series.reduce((acc, s) => acc + (values[w]?.[s.key] ?? 0), 0)))
  return {
    animation: false,
    textStyle: { fontFamily: FONT },
    grid: { left: 32, right: 16, top: 40, bottom: many ? 48 : 8, containLabel: true },
    legend: { top: 0, left: 0, itemWidth: 12, itemHeight: 12, itemGap: 16, icon: 'roundRect', textStyle: { color: c.text } },
    tooltip: {
      trigger: 'axis',
      axisPointer: { type: 'shadow' },
      ...tooltipBase(c),
      formatter: (params: { dataIndex: number; seriesName: string; value: number; marker: string }[]) => {
        if (!params.length) return ''
        const worker = workers[params[0].dataIndex]
        const total = params.reduce((acc, p) => acc + (p.value ?? 0), 0)
        const rows = params
          .slice()
          .reverse()
          .map(
            (p) =>
              `<tr><td>${p.marker}${escapeHtml(p.seriesName)}</td><td style="text-align:right;padding-left:16px">${duration(p.value)}</td><td style="text-align:right;padding-left:12px">${pct(share(p.value, total))}</td></tr>`,
          )
          .join('')
        return `<div style="font-weight:500;margin-bottom:4px">${escapeHtml(worker)} &middot; ${duration(total)}</div><table style="border-spacing:0;font-size:12px">${rows}</table>`
      },
    },
    xAxis: {
      type: 'category',
      data: workers,
      axisLabel: { color: c.muted, rotate: many ? 45 : 0, interval: many ? 'auto' : 0, overflow: 'truncate', width: many ? 90 : 160 },
      axisLine: { lineStyle: { color: c.grid } },
      axisTick: { show: false },
    },
    yAxis: timeValueAxis(theme, 'Time', maxTotal),
    dataZoom: workers.length > 32 ? [{ type: 'slider', xAxisIndex: 0, height: 16, bottom: 4, startValue: 0, endValue: 31 }] : undefined,
    series: series.map((s) => ({
      name: s.label,
      type: 'bar',
      stack: 'total',
      barMaxWidth: 64,
      itemStyle: { color: s.color },
      emphasis: { focus: 'series' },
      data: workers.map((w) => values[w]?.[s.key] ?? 0),
    })),
  }
}

// ---------------------------------------------------------------------------------------------

const OP_SORT: SortState = { key: 'total_latency_us', desc: true }

function CommOpsCard({ data, csvUrl }: { data: DistributedPayload; csvUrl: string }) {
  const withOps = data.workers.filter((w) => (data.comm_ops[w]?.rows.length ?? 0) > 0)
  const [picked, setPicked] = useState('')
  const worker = picked && data.workers.includes(picked) ? picked : (withOps[0] ?? data.workers[0] ?? '')
  const [sort, setSort] = useState<SortState>(OP_SORT)
  const rows = data.comm_ops[worker]?.rows ?? []
  const rowKey = useCallback((r: CommOpRow) => r.name, [])
  return (
    <Card
      title="Communication operations"
      subtitle={<span data-testid="dist-ops-count">{count(rows.length)} collective{rows.length === 1 ? '' : 's'} on {worker} · latency = time in the op; transfer = the part all workers needed</span>}
      actions={
        <div className="dist-actions">
          <div className="dist-worker">
            <Field label="Worker">
              {(id) => <Select id={id} value={worker} onChange={setPicked} options={data.workers.map((w) => ({ value: w, label: w }))} testId="dist-ops-worker" />}
            </Field>
          </div>
          <DownloadLink href={csvUrl} testId="dist-csv" />
        </div>
      }
      testId="dist-ops-card"
    >
      <DataTable columns={COMM_COLUMNS} rows={rows} rowKey={rowKey} sort={sort} onSort={setSort} maxHeight={420} label="Communication operations" testId="dist-ops" emptyText="This worker recorded no communication op." />
    </Card>
  )
}

/** Bytes per second in decimal units, as link speeds are quoted: "6.37 GB/s", "812.50 MB/s". */
function rate(perSecond: number): string {
  if (perSecond >= 1e9) return `${num2(perSecond / 1e9)} GB/s`
  if (perSecond >= 1e6) return `${num2(perSecond / 1e6)} MB/s`
  return `${num2(perSecond / 1e3)} kB/s`
}

const COMM_COLUMNS: Column<CommOpRow>[] = [
  { key: 'name', header: 'Name', width: 'minmax(180px, 2fr)', render: (r) => <span className="cell-name">{r.name}</span>, cellTitle: (r) => r.name, sortValue: (r) => r.name },
  { key: 'calls', header: 'Calls', width: '68px', align: 'right', render: (r) => count(r.calls), sortValue: (r) => r.calls },
  { key: 'total_bytes', header: 'Total size', width: '100px', align: 'right', render: (r) => bytes(r.total_bytes), cellTitle: (r) => `${count(r.total_bytes)} bytes`, sortValue: (r) => r.total_bytes },
  { key: 'avg_bytes', header: 'Avg size', width: '96px', align: 'right', render: (r) => bytes(r.avg_bytes), cellTitle: (r) => `${count(r.avg_bytes)} bytes`, sortValue: (r) => r.avg_bytes },
  { key: 'total_latency_us', header: 'Latency (us)', title: 'Total time in the op (merged host and kernel ranges)', width: '112px', align: 'right', render: (r) => us(r.total_latency_us), sortValue: (r) => r.total_latency_us },
  { key: 'avg_latency_us', header: 'Avg latency', title: 'Latency per call (us)', width: '104px', align: 'right', render: (r) => us(r.avg_latency_us), sortValue: (r) => r.avg_latency_us },
  { key: 'total_transfer_us', header: 'Transfer (us)', title: 'Total data-transfer time: for each call, the shortest duration over the workers', width: '116px', align: 'right', render: (r) => us(r.total_transfer_us), sortValue: (r) => r.total_transfer_us },
  { key: 'avg_transfer_us', header: 'Avg transfer', title: 'Transfer time per call (us)', width: '108px', align: 'right', render: (r) => us(r.avg_transfer_us), sortValue: (r) => r.avg_transfer_us },
  {
    key: 'bandwidth',
    header: 'Bandwidth',
    title: 'Total size / total transfer time',
    width: '100px',
    align: 'right',
    render: (r) => (r.total_transfer_us > 0 && r.total_bytes > 0 ? rate((r.total_bytes / r.total_transfer_us) * 1e6) : '–'),
    sortValue: (r) => (r.total_transfer_us > 0 ? r.total_bytes / r.total_transfer_us : null),
  },
]
