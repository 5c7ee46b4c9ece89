// GPU Idle view (one worker span): why the GPU is idle. Every card states its formula, taken
// from the payload (`formulas`), so the UI and the README cannot drift from the code.
import type { Navigate } from '../../urlState'
import { useMemo, useState } from 'react'
import type { Selection } from '../../api'
import { Async } from '../../components/Async'
import { Chart } from '../../charts/Chart'
import { useViewStyle } from '../../components/style'
import { Banner, Card, DownloadLink, Empty, Segmented } from '../../components/ui'
import { StatCard } from '../../components/StatCard'
import { count, duration, pct, share, us } from '../../format'
import { useAsync } from '../../hooks'
import type { Theme } from '../../theme'
import type { UiState } from '../../urlState'
import { fetchGpuIdle, gpuIdleCsvUrl, type GpuIdlePayload } from './api'
import { histogramOption, stackedBars, timeSeriesOption, type Part } from './charts'
import css from './gpu_idle.css?inline'
import { WhatIfCard } from './WhatIf'
import { AnnotationTable, CriticalPathCard, GapTable, OutlierTable, Recommendations, SequenceTable } from './tables'

interface Props {
  selection: Selection
  theme: Theme
  views: string[]
  onNavigate: Navigate
  state?: UiState
  update?: (patch: Partial<UiState>) => void
}

export function GpuIdleView({ selection, theme, views, onNavigate, state: url, update }: Props) {
  useViewStyle('gpu-idle', css)
  const key = `${selection.run}\u0000${selection.worker}\u0000${selection.span}`
  const state = useAsync('gpu_idle', key, (signal) => fetchGpuIdle(selection, signal))
  const edit = url?.wiEdit ?? ''
  return (
    <>
      <WhatIfCard selection={selection} edit={edit} onEdit={(next) => update?.({ wiEdit: next })} />
      <Async state={state} what="the GPU Idle view" label="Diagnosing">
        {(data) => <Content data={data} theme={theme} csvUrl={gpuIdleCsvUrl(selection)} views={views} onNavigate={onNavigate} onShowOnTrace={update && views.includes('Trace') ? (step) => update({ view: 'Trace', tCrit: step }) : undefined} />}
      </Async>
    </>
  )
}

export function Formula({ text }: { text: string }) {
  return (
    <p className="formula" data-testid="formula">
      <span className="formula-label">Formula</span> {text}
    </p>
  )
}

const TEMPORAL: Part[] = [
  { key: 'compute_us', label: 'Compute', color: '#1976d2' },
  { key: 'communication_us', label: 'Communication', color: '#8e24aa' },
  { key: 'memory_us', label: 'Memory (copy/set)', color: '#00897b' },
  { key: 'idle_us', label: 'Idle', color: '#9e9e9e' },
]
const IDLE: Part[] = [
  { key: 'host_wait_us', label: 'Host wait', color: '#e53935' },
  { key: 'kernel_wait_us', label: 'Kernel wait', color: '#fbc02d' },
  { key: 'other_us', label: 'Other', color: '#9e9e9e' },
]

function Content({ data, theme, csvUrl, views, onNavigate, onShowOnTrace }: { data: GpuIdlePayload; theme: Theme; csvUrl: string; views: string[]; onNavigate: Navigate; onShowOnTrace?: (step: string) => void }) {
  const f = data.formulas
  return (
    <div className="view gpu-idle" data-testid="gpu-idle-view">
      {!data.applicable && (
        <Banner kind="info" title="GPU analyses do not apply" testId="gpu-idle-na">
          {data.message}
        </Banner>
      )}
      {data.applicable && data.graphs.notes.length > 0 && (
        <Banner kind="info" title="CUDA/HIP graphs" testId="gpu-idle-graphs">
          {data.graphs.notes.map((n, i) => (
            <p key={i}>{n}</p>
          ))}
        </Banner>
      )}
      <Card title="Diagnosis" subtitle="Graded recommendations, each with the view and time range that prove it" actions={<DownloadLink href={csvUrl} testId="gpu-idle-csv" />} testId="gpu-idle-recs">
        <Recommendations items={data.recommendations} views={views} onNavigate={onNavigate} />
      </Card>
      {data.applicable && (
        <>
          <TemporalCard data={data} theme={theme} formula={f.temporal} />
          <IdleCard data={data} theme={theme} formula={f.idle} />
          <LaunchCard data={data} theme={theme} formula={f.launch} />
          <div className="grid two">
            <QueueCard data={data} theme={theme} formula={f.queue} />
            <BandwidthCard data={data} theme={theme} formula={f.bandwidth} />
          </div>
          <CriticalPathCard path={data.critical_path} theme={theme} onShowOnTrace={onShowOnTrace} />
          <Card title="Frequent kernel sequences" subtitle="Fusion candidates: an operator and the kernels it launches, by GPU time" testId="gpu-idle-sequences">
            <SequenceTable rows={data.sequences} />
            <Formula text={f.sequences} />
          </Card>
        </>
      )}
      <Card title="User annotations" subtitle="record_function and gpu_user_annotation ranges with the GPU time of the kernels inside them" testId="gpu-idle-annotations">
        <AnnotationTable rows={data.annotations} />
        <Formula text={f.annotations} />
      </Card>
    </div>
  )
}

function TemporalCard({ data, theme, formula }: { data: GpuIdlePayload; theme: Theme; formula: string }) {
  const rows = data.temporal.map((d) => `GPU ${d.device}`)
  const option = useMemo(() => stackedBars(rows, TEMPORAL, data.temporal as unknown as Record<string, number>[], theme), [rows, data.temporal, theme])
  return (
    <Card title="Temporal breakdown" subtitle="Per GPU over its active window, us; the four parts sum to the window" testId="gpu-idle-temporal">
      <div className="stats">
        {data.temporal.map((d) => (
          <StatCard key={d.device} label={`GPU ${d.device} idle`} value={pct(d.idle_pct)} sub={`${duration(d.idle_us)} of ${duration(d.window_us)} · compute ∩ communication ${duration(d.compute_communication_overlap_us)}`} testId={`gpu-idle-pct-${d.device}`} />
        ))}
      </div>
      <Chart option={option} height={60 + 36 * rows.length} label="Temporal breakdown per GPU" testId="gpu-idle-temporal-chart" />
      <Formula text={formula} />
    </Card>
  )
}

function IdleCard({ data, theme, formula }: { data: GpuIdlePayload; theme: Theme; formula: string }) {
  const streams = data.idle.streams
  const rows = streams.map((s) => `GPU ${s.device} · stream ${s.stream}`)
  const option = useMemo(() => stackedBars(rows, IDLE, streams as unknown as Record<string, number>[], theme), [rows, streams, theme])
  const hist = useMemo(() => histogramOption(data.idle.gap_histogram, 'Gap', '#e53935', theme), [data.idle.gap_histogram, theme])
  const total = streams.reduce((a, s) => a + s.idle_us, 0)
  const host = streams.reduce((a, s) => a + s.host_wait_us, 0)
  return (
    <Card title="Idle time by cause" subtitle={`Per stream; host wait is ${pct(share(host, total))} of ${duration(total)} of gaps`} testId="gpu-idle-idle">
      {streams.length === 0 ? (
        <Empty title="No streams">The device events carry no stream.</Empty>
      ) : (
        <div className="grid two">
          <Chart option={option} height={60 + 32 * rows.length} label="Idle time by cause per stream" testId="gpu-idle-idle-chart" />
          <Chart option={hist} height={240} label="Gap distribution" testId="gpu-idle-gap-hist" />
        </div>
      )}
      <GapTable gaps={data.idle.largest_gaps} />
      <Formula text={formula} />
    </Card>
  )
}

const HISTS = [
  { value: 'cpu_us', label: 'Launch call (CPU)' },
  { value: 'gpu_us', label: 'Kernel (GPU)' },
  { value: 'delay_us', label: 'Launch delay' },
] as const
type HistKey = (typeof HISTS)[number]['value']

function LaunchCard({ data, theme, formula }: { data: GpuIdlePayload; theme: Theme; formula: string }) {
  const l = data.launch
  const [which, setWhich] = useState<HistKey>('delay_us')
  const option = useMemo(() => histogramOption(l.histograms[which], HISTS.find((h) => h.value === which)!.label, '#1976d2', theme), [l.histograms, which, theme])
  return (
    <Card
      title="Kernel launches"
      subtitle="CPU launch call vs GPU kernel, and the delay between them"
      actions={<Segmented label="Histogram" value={which} onChange={setWhich} options={HISTS.map((h) => ({ value: h.value, label: h.label }))} testId="gpu-idle-hist-pick" />}
      testId="gpu-idle-launch"
    >
      <div className="stats">
        <StatCard label="Kernels launched" value={count(l.kernels)} sub={`${duration(l.cpu_us_total)} CPU · ${duration(l.gpu_us_total)} GPU`} testId="gpu-idle-kernels" />
        <StatCard label="Shorter than their launch" value={count(l.short_kernels)} sub={`${pct(share(l.short_kernels, l.kernels))} of kernels`} testId="gpu-idle-short" />
        <StatCard label="Median launch delay" value={l.median_delay_us === null ? 'n/a' : duration(l.median_delay_us)} sub={`${count(l.delay_outliers)} over ${duration(l.delay_cutoff_us)}`} testId="gpu-idle-delay" />
        <StatCard label="Slow launch calls" value={count(l.runtime_outliers)} sub={`over ${duration(l.runtime_cutoff_us)}`} testId="gpu-idle-runtime-outliers" />
      </div>
      <Chart option={option} height={240} label="Launch histogram" testId="gpu-idle-launch-hist" />
      <OutlierTable title="Longest launch delays" rows={l.top_delay_outliers} />
      <Formula text={formula} />
    </Card>
  )
}

function QueueCard({ data, theme, formula }: { data: GpuIdlePayload; theme: Theme; formula: string }) {
  const streams = data.queue.streams
  const origin = Math.min(...streams.map((s) => s.series.t_us[0] ?? Infinity))
  const option = useMemo(
    () => timeSeriesOption(origin, streams.map((s) => ({ name: `GPU ${s.device} · stream ${s.stream}`, t: s.series.t_us, v: s.series.length })), 'queued', theme),
    [origin, streams, theme],
  )
  return (
    <Card title="Queue length" subtitle={`Per stream over time (ms from the first launch); full at ${count(data.queue.queue_full)}`} testId="gpu-idle-queue">
      {streams.length === 0 ? <Empty title="No launches linked to streams" /> : <Chart option={option} height={240} label="Queue length over time" testId="gpu-idle-queue-chart" />}
      <table className="simple-table">
        <thead>
          <tr>
            <th>Stream</th>
            <th className="right">Max</th>
            <th className="right">Mean</th>
            <th className="right">Full, us</th>
          </tr>
        </thead>
        <tbody>
          {streams.map((s) => (
            <tr key={`${s.device}-${s.stream}`}>
              <td>{`GPU ${s.device} · stream ${s.stream}`}</td>
              <td className="right">{count(s.max)}</td>
              <td className="right">{s.mean.toFixed(2)}</td>
              <td className="right">{us(s.full_us)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <Formula text={formula} />
    </Card>
  )
}

function BandwidthCard({ data, theme, formula }: { data: GpuIdlePayload; theme: Theme; formula: string }) {
  const bw = data.bandwidth
  const t = bw.series.t_us
  const option = useMemo(() => timeSeriesOption(t[0] ?? 0, Object.entries(bw.series.gbps).map(([name, v]) => ({ name, t, v })), 'GB/s', theme, false), [t, bw.series.gbps, theme])
  return (
    <Card title="Memory-copy bandwidth" subtitle="GB/s per copy kind over time (ms from the first copy)" testId="gpu-idle-bandwidth">
      {bw.kinds.length === 0 ? <Empty title="No memcpy or memset" /> : <Chart option={option} height={240} label="Bandwidth over time" testId="gpu-idle-bw-chart" />}
      <table className="simple-table">
        <thead>
          <tr>
            <th>Kind</th>
            <th className="right">Copies</th>
            <th className="right">Busy, us</th>
            <th className="right">Mean GB/s</th>
            <th className="right">Peak GB/s</th>
          </tr>
        </thead>
        <tbody>
          {bw.kinds.map((k) => (
            <tr key={k.kind}>
              <td>{k.kind}</td>
              <td className="right">{count(k.count)}</td>
              <td className="right">{us(k.busy_us)}</td>
              <td className="right">{k.mean_gbps === null ? 'n/a' : k.mean_gbps.toFixed(2)}</td>
              <td className="right">{k.peak_gbps.toFixed(2)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <Formula text={formula} />
    </Card>
  )
}
