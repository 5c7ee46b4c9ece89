import { useMemo } from 'react'
import { api, type Category, type GpuInfo, type Overview, type Pie, type Recommendation, type RunAdvice, type Selection } from '../../api'
import { Chart } from '../../charts/Chart'
import { Donut } from '../../charts/Donut'
import { categoryColor, stepsOption } from '../../charts/options'
import { Card, Empty, Stat } from '../../components/ui'
import { duration, num2, pct, share, us } from '../../format'
import { useAsync } from '../../hooks'
import type { Theme } from '../../theme'
import { useViewStyle } from '../../components/style'
import css from './overview.css?inline'
import { Async } from '../../components/Async'
import { evidenceText, evidenceWindow, savingText } from '../../components/advice'
import type { Navigate } from '../../urlState'
import { withRunAdvice } from './advice'
import { VarianceCard } from './Variance'

interface Props {
  selection: Selection
  workerCount: number
  theme: Theme
  onNavigate: Navigate
  views: string[]
}

export function OverviewView({ selection, workerCount, theme, onNavigate, views }: Props) {
  useViewStyle('overview', css)
  const key = `${selection.run}\u0000${selection.worker}\u0000${selection.span}`
  const state = useAsync('overview', key, (signal) => api.overview(selection, signal))
  // several workers: the span's run-level advice (the straggler) goes first; a run without it,
  // or whose answer fails, shows the worker's own advice alone
  const runKey = workerCount > 1 ? `${selection.run}\u0000${selection.span}` : null
  const run = useAsync('overview/run', runKey, (signal) => api.overviewRun(selection, signal))
  const runAdvice = run.status === 'ok' ? run.data : null
  // until the other workers are checked, the worker's own advice is not shown first: a straggler
  // would outrank it (root cause before symptom)
  const runPending = run.status === 'pending' ? { progress: run.progress } : null

  return (
    <Async state={state} what="the overview" label="Loading overview">
      {(data) => <OverviewContent data={data} runAdvice={runAdvice} runPending={runPending} workerCount={workerCount} theme={theme} onNavigate={onNavigate} views={views} />}
    </Async>
  )
}

function categoriesOf(data: Overview): Category[] {
  if (data.categories.length) return data.categories
  return Object.keys(data.average.breakdown_us) as Category[]
}

function OverviewContent({
  data,
  runAdvice,
  runPending,
  workerCount,
  theme,
  onNavigate,
  views,
}: {
  data: Overview
  runAdvice: RunAdvice | null
  runPending: { progress: number | null } | null
  workerCount: number
  theme: Theme
  onNavigate: Navigate
  views: string[]
}) {
  const categories = useMemo(() => categoriesOf(data), [data])
  const recommendations = useMemo(() => withRunAdvice(data.recommendations, runAdvice), [data, runAdvice])
  const total = data.average.total_us
  const deviceType = data.environment.device_type

  const pie: Pie | null = useMemo(() => {
    const slices = categories.map((name) => ({ name, value: data.average.breakdown_us[name] ?? 0 }))
    const sum = slices.reduce((a, s) => a + s.value, 0)
    return sum > 0 ? { slices, other: 0, total: sum } : null
  }, [categories, data])
  const pieColors = useMemo(() => categories.map((c, i) => categoryColor(c, i)), [categories])

  const stepOption = useMemo(
    () =>
      stepsOption(
        {
          categories,
          steps: data.steps.map((s) => ({ name: s.name, total: s.total_us, values: s.breakdown_us })),
        },
        theme,
      ),
    [categories, data.steps, theme],
  )

  const extraEnv = environmentRows(data.environment).filter(([k]) => !(k === 'GPUs' && data.gpus.length > 0))
  // CUDA compute capability only where a GPU has one (AMD GPUs show their gfx architecture)
  const anyCc = data.gpus.some((g) => g.compute_capability != null)

  return (
    <div className="view overview" data-testid="overview">
      <div className="grid two">
        <Card title="Configuration" testId="configuration">
          <dl className="kv">
            <dt>Workers</dt>
            <dd data-testid="worker-count">{workerCount}</dd>
            <dt>Device type</dt>
            <dd data-testid="device-type">{deviceType}</dd>
            {extraEnv.map(([k, v]) => (
              <FragmentKV key={k} label={k === 'GPUs' ? k : humanize(k)} value={v} />
            ))}
          </dl>
          {data.gpus.length > 0 && (
            <table className="simple-table gpu-table">
              <thead>
                <tr>
                  <th>GPU</th>
                  <th>Name</th>
                  <th className="right">Memory</th>
                  {anyCc && <th className="right">Compute capability</th>}
                  <th>Architecture</th>
                </tr>
              </thead>
              <tbody>
                {data.gpus.map((g) => (
                  <tr key={String(g.id)}>
                    <td>{String(g.id)}</td>
                    <td>{g.name ?? '–'}</td>
                    <td className="right">{g.memory_gb != null ? `${num2(g.memory_gb)} GB` : '–'}</td>
                    {anyCc && <td className="right">{g.compute_capability ?? '–'}</td>}
                    <td>{[g.vendor, g.architecture].filter(Boolean).join(' ') || '–'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </Card>
        {data.gpus.length > 0 ? (
          <Card title="GPU summary" subtitle="Over the profiled steps" testId="gpu-summary">
            <div className="gpu-list">
              {data.gpus.map((g) => (
                <GpuSummary key={String(g.id)} gpu={g} />
              ))}
            </div>
          </Card>
        ) : (
          <Card title="GPU summary" testId="gpu-summary">
            <Empty title="No GPU activity">This trace has no GPU kernels; host-side views still apply.</Empty>
          </Card>
        )}
      </div>

      <Card title="Execution summary" subtitle="Average over the profiled steps; each step's time is split by category in priority order" testId="execution-summary">
        <div className="summary-layout">
          <div className="summary-left">
            <Stat label="Average step time" value={<span data-testid="avg-step-time">{duration(total)}</span>} />
            <div className="stat-sub">
              {us(total)} us · {data.steps.length} step{data.steps.length === 1 ? '' : 's'}
            </div>
            <table className="simple-table breakdown-table" data-testid="breakdown-table">
              <thead>
                <tr>
                  <th>Category</th>
                  <th className="right">Time</th>
                  <th className="right">Share</th>
                </tr>
              </thead>
              <tbody>
                {categories.map((cat, i) => {
                  const v = data.average.breakdown_us[cat] ?? 0
                  return (
                    <tr key={cat} data-category={cat}>
                      <td>
                        <span className="swatch" style={{ background: categoryColor(cat, i) }} aria-hidden="true" />
                        {cat}
                      </td>
                      <td className="right mono">{duration(v)}</td>
                      <td className="right mono">{pct(share(v, total))}</td>
                    </tr>
                  )
                })}
              </tbody>
            </table>
          </div>
          <div className="summary-right">
            <Donut title="Step time by category" pie={pie} theme={theme} colors={pieColors} height={260} testId="breakdown-donut" />
          </div>
        </div>
        {data.notes.length > 0 && (
          <ul className="notes" data-testid="overview-notes">
            {data.notes.map((n, i) => (
              <li key={i}>{n}</li>
            ))}
          </ul>
        )}
      </Card>

      <Card title="Step time breakdown" subtitle="Time of each profiler step, stacked by category; hover a bar for values and shares" testId="step-chart">
        {data.steps.length > 0 ? (
          <Chart option={stepOption} height={320} label="Step time breakdown chart" testId="step-chart-canvas" />
        ) : (
          <Empty title="No steps found">The trace has no ProfilerStep markers.</Empty>
        )}
      </Card>

      <VarianceCard variance={data.variance} lateByStep={runAdvice?.late_by_step} onNavigate={onNavigate} traceShown={views.includes('Trace')} />

      <Card title="Performance recommendations" testId="recommendations">
        {runPending ? (
          <p className="muted" data-testid="run-advice-pending">
            Checking the other workers of this span for a straggler
            {runPending.progress !== null ? ` (${Math.round(runPending.progress * 100)}%)` : ''}…
          </p>
        ) : recommendations.length === 0 ? (
          <Empty title="Nothing stands out">No rule fired for this span.</Empty>
        ) : (
          <ul className="recs">
            {recommendations.map((r, i) => (
              <RecommendationItem key={i} rec={r} onNavigate={onNavigate} views={views} />
            ))}
          </ul>
        )}
      </Card>
    </div>
  )
}

function FragmentKV({ label, value }: { label: string; value: string }) {
  return (
    <>
      <dt>{label}</dt>
      <dd>{value}</dd>
    </>
  )
}

function environmentRows(env: Overview['environment']): [string, string][] {
  const rows: [string, string][] = []
  for (const [key, value] of Object.entries(env)) {
    if (key === 'device_type' || value === null || value === undefined || value === '') continue
    if (key === 'distributed' && typeof value === 'object') {
      const d = value as { backend?: unknown; rank?: unknown; world_size?: unknown }
      const parts = [
        d.backend ? String(d.backend) : null,
        d.rank !== undefined && d.rank !== null ? `rank ${String(d.rank)}${d.world_size ? ` of ${String(d.world_size)}` : ''}` : null,
      ].filter(Boolean)
      if (parts.length) rows.push(['distributed', parts.join(', ')])
      continue
    }
    if (key === 'gpu_count') {
      if (Number(value) > 0) rows.push(['GPUs', String(value)])
      continue
    }
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') rows.push([key, String(value)])
  }
  return rows
}

function humanize(key: string): string {
  const text = key.replace(/_/g, ' ')
  return text.charAt(0).toUpperCase() + text.slice(1)
}

function Meter({ label, value, hint }: { label: string; value: number | null | undefined; hint: string }) {
  const known = value !== null && value !== undefined && Number.isFinite(value)
  return (
    <div className="meter" title={hint}>
      <div className="meter-top">
        <span>{label}</span>
        <span className="mono">{known ? pct(value) : 'n/a'}</span>
      </div>
      <div className="meter-track">
        <div className="meter-fill" style={{ width: `${known ? Math.min(100, Math.max(0, value)) : 0}%` }} />
      </div>
    </div>
  )
}

function GpuSummary({ gpu }: { gpu: GpuInfo }) {
  return (
    <div className="gpu" data-testid="gpu">
      <div className="gpu-name">
        GPU {String(gpu.id)}
        {gpu.name ? <span className="muted"> · {gpu.name}</span> : null}
        {gpu.vendor || gpu.architecture ? (
          <span className="muted" data-testid="gpu-arch">
            {' '}
            · {[gpu.vendor, gpu.architecture].filter(Boolean).join(' ')}
          </span>
        ) : null}
      </div>
      <Meter label="GPU utilization" value={gpu.utilization_pct} hint="Share of the step time in which at least one kernel ran on this GPU." />
      <Meter label="Est. SM efficiency" value={gpu.sm_efficiency_pct} hint="Estimated share of streaming multiprocessors busy, weighted by time (blocks per SM, capped at 1)." />
      <Meter label="Est. achieved occupancy" value={gpu.achieved_occupancy_pct} hint="Time-weighted estimated achieved occupancy of the kernels." />
      <Meter label={`Kernel time on ${gpu.matrix_units}`} value={gpu.tensor_core_pct} hint={`Share of kernel time spent in kernels that use ${gpu.matrix_units}${gpu.vendor === 'AMD' ? ' (MFMA)' : ''}.`} />
      <Meter
        label="MFU"
        value={gpu.mfu_pct}
        hint={
          gpu.peaks_model
            ? `Model FLOPs utilisation: the operators' FLOPs at the ${gpu.peaks_model} peak of the precision they ran in, over the step time; operators above their roof are left out (see the Operator view's roofline).`
            : gpu.peaks_reason
              ? `No MFU: ${gpu.peaks_reason}.`
              : 'Unknown device: not in the peaks table, so no MFU.'
        }
      />
      <Meter
        label="MBU"
        value={gpu.mbu_pct}
        hint={gpu.peaks_model ? `Memory-bandwidth utilisation: the operators' bytes moved over the step time at the ${gpu.peaks_model} peak bandwidth.` : 'Unknown device: not in the peaks table, so no MBU.'}
      />
    </div>
  )
}

const VIEW_ALIASES: Record<string, string> = { kernel: 'Kernel', kernels: 'Kernel', operator: 'Operator', operators: 'Operator', overview: 'Overview' }

function safeLink(link: string | null | undefined): string | null {
  if (!link) return null
  try {
    const url = new URL(link)
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.toString() : null
  } catch {
    return null
  }
}

function metricText(rec: Recommendation): string {
  const value = num2(rec.metric)
  const unit = rec.unit ? (rec.unit === '%' ? ' %' : ` ${rec.unit}`) : ''
  return `${value}${unit}`
}

function RecommendationItem({ rec, onNavigate, views }: { rec: Recommendation; onNavigate: Navigate; views: string[] }) {
  const target = rec.view ? (views.find((v) => v.toLowerCase() === rec.view!.toLowerCase()) ?? VIEW_ALIASES[rec.view.toLowerCase()] ?? rec.view) : null
  const available = target !== null && views.includes(target)
  const links = (rec.links && rec.links.length ? rec.links : rec.link ? [{ label: 'Learn more', url: rec.link }] : [])
    .map((l) => ({ label: l.label || 'Learn more', url: safeLink(l.url) }))
    .filter((l): l is { label: string; url: string } => l.url !== null)
  const severity = rec.severity === 'high' || rec.severity === 'medium' || rec.severity === 'low' ? rec.severity : 'low'
  const metric = metricText(rec)
  const saving = savingText(rec)
  const evidence = evidenceText(rec)
  const window = evidenceWindow(rec)
  return (
    <li className={`rec ${severity}`} data-testid="recommendation">
      <span className={`chip ${severity}`}>{severity}</span>
      <div className="rec-body">
        <div className="rec-title">
          {rec.title}
          {metric && <span className="rec-metric">{metric}</span>}
        </div>
        <div className="rec-text">{rec.text}</div>
        {saving && (
          <div className="rec-saving" data-testid="rec-saving">
            {saving}
          </div>
        )}
        {evidence && (
          <div className="rec-evidence muted" data-testid="rec-evidence">
            Evidence: {evidence}
          </div>
        )}
        <div className="rec-actions">
          {available && (
            <button type="button" className="link-button" onClick={() => onNavigate(target)} data-testid="rec-view-link">
              Open {target === 'Kernel' ? 'GPU Kernel' : target} view →
            </button>
          )}
          {window && views.includes('Trace') && (
            <button type="button" className="link-button" onClick={() => onNavigate('Trace', { tWin: window, tCrit: '' })} data-testid="rec-show-on-trace">
              Show the evidence on Trace →
            </button>
          )}
          {rec.whatif && views.includes('GPU Idle') && (
            <button type="button" className="link-button" onClick={() => onNavigate('GPU Idle', { wiEdit: rec.whatif ?? '' })} data-testid="rec-whatif">
              What if ({rec.whatif})? →
            </button>
          )}
          {links.map((l) => (
            <a key={l.url} className="link-button" href={l.url} target="_blank" rel="noopener noreferrer">
              {l.label} ↗
            </a>
          ))}
        </div>
      </div>
    </li>
  )
}
