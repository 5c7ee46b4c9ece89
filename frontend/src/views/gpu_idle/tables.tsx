// Tables and the critical-path card of the GPU Idle view.
import { evidenceText, evidenceWindow, savingText } from '../../components/advice'
import type { Navigate } from '../../urlState'
import { useMemo, useState } from 'react'
import type { Recommendation } from '../../api'
import { Chart } from '../../charts/Chart'
import { Card, Empty, Select } from '../../components/ui'
import { count, pct, share, us } from '../../format'
import type { Theme } from '../../theme'
import type { CriticalPath, GpuIdlePayload, LaunchOutlier } from './api'
import { stackedBars, type Part } from './charts'

type Gap = GpuIdlePayload['idle']['largest_gaps'][number]
type Sequence = GpuIdlePayload['sequences'][number]
type Annotation = GpuIdlePayload['annotations'][number]

export function Recommendations({ items, views, onNavigate }: { items: Recommendation[]; views: string[]; onNavigate: Navigate }) {
  if (items.length === 0) return <Empty title="Nothing stands out">No rule fired for this span.</Empty>
  return (
    <ul className="gi-recs">
      {items.map((r) => (
        <li key={r.id} className={`gi-rec ${r.severity}`} data-testid="gpu-idle-rec" data-rule={r.id}>
          <span className={`chip ${r.severity}`}>{r.severity}</span>
          <div>
            <div className="gi-rec-title">{r.title}</div>
            <div className="gi-rec-text">{r.text}</div>
            {savingText(r) && <div className="gi-rec-saving">{savingText(r)}</div>}
            <div className="gi-rec-evidence muted">
              Evidence: {r.view} view{evidenceText(r) ? `, ${evidenceText(r)}` : ''}
              {views.includes(r.view) && r.view !== 'GPU Idle' && (
                <button type="button" className="link-button" onClick={() => onNavigate(r.view)}>
                  Open {r.view} view →
                </button>
              )}
              {evidenceWindow(r) && views.includes('Trace') && (
                <button type="button" className="link-button" onClick={() => onNavigate('Trace', { tWin: evidenceWindow(r) ?? '', tCrit: '' })} data-testid="gpu-idle-rec-trace">
                  Show the evidence on Trace →
                </button>
              )}
              {r.whatif && (
                <button type="button" className="link-button" onClick={() => onNavigate('GPU Idle', { wiEdit: r.whatif ?? '' })} data-testid="gpu-idle-rec-whatif">
                  What if ({r.whatif})? →
                </button>
              )}
            </div>
          </div>
        </li>
      ))}
    </ul>
  )
}

export function GapTable({ gaps }: { gaps: Gap[] }) {
  if (gaps.length === 0) return null
  return (
    <table className="simple-table" data-testid="gpu-idle-gaps">
      <caption>Longest gaps</caption>
      <thead>
        <tr>
          <th>Stream</th>
          <th className="right">Gap, us</th>
          <th>Cause</th>
          <th className="right">Starts at (trace us)</th>
          <th className="right">Next event id</th>
        </tr>
      </thead>
      <tbody>
        {gaps.map((g) => (
          <tr key={`${g.device}-${g.stream}-${g.start_us}`}>
            <td>{`GPU ${g.device} · stream ${g.stream}`}</td>
            <td className="right">{us(g.gap_us)}</td>
            <td>{g.cause.replace('_', ' ')}</td>
            <td className="right mono">{us(g.start_us)}</td>
            <td className="right mono">{g.next_event}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}

export function OutlierTable({ title, rows }: { title: string; rows: LaunchOutlier[] }) {
  if (rows.length === 0) return null
  return (
    <table className="simple-table" data-testid="gpu-idle-outliers">
      <caption>{title}</caption>
      <thead>
        <tr>
          <th>Kernel</th>
          <th className="right">CPU, us</th>
          <th className="right">GPU, us</th>
          <th className="right">Delay, us</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((r) => (
          <tr key={r.event}>
            <td className="mono name" title={r.name}>
              {r.name}
            </td>
            <td className="right">{us(r.cpu_us)}</td>
            <td className="right">{us(r.gpu_us)}</td>
            <td className="right">{us(r.delay_us)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}

export function SequenceTable({ rows }: { rows: Sequence[] }) {
  if (rows.length === 0) return <Empty title="No operator launched kernels" />
  return (
    <table className="simple-table" data-testid="gpu-idle-seq-table">
      <thead>
        <tr>
          <th>Operator</th>
          <th>Kernels, in order</th>
          <th className="right">Calls</th>
          <th className="right">GPU, us</th>
          <th className="right">CPU, us</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((r, i) => (
          <tr key={i} className={r.fusion_candidate ? 'fusion' : undefined}>
            <td className="mono">{r.operator}</td>
            <td className="mono name" title={r.kernels.join('\n')}>
              {r.kernels.length} · {r.kernels.join(' › ')}
            </td>
            <td className="right">{count(r.count)}</td>
            <td className="right">{us(r.gpu_us)}</td>
            <td className="right">{us(r.cpu_us)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}

export function AnnotationTable({ rows }: { rows: Annotation[] }) {
  if (rows.length === 0) return <Empty title="No user annotations">Wrap code in torch.profiler.record_function("name") to see its GPU time here.</Empty>
  return (
    <table className="simple-table" data-testid="gpu-idle-ann-table">
      <thead>
        <tr>
          <th>Annotation</th>
          <th>Side</th>
          <th className="right">Ranges</th>
          <th className="right">Wall, us</th>
          <th className="right">GPU, us</th>
          <th className="right">Kernels</th>
        </tr>
      </thead>
      <tbody>
        {rows.slice(0, 50).map((r) => (
          <tr key={`${r.side}-${r.name}`}>
            <td className="mono name" title={r.name}>
              {r.name}
            </td>
            <td>{r.side}</td>
            <td className="right">{count(r.ranges)}</td>
            <td className="right">{us(r.wall_us)}</td>
            <td className="right">{us(r.gpu_us)}</td>
            <td className="right">{count(r.kernels)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}

const PATH: Part[] = [
  { key: 'host_compute', label: 'Host compute', color: '#fbc02d' },
  { key: 'launch', label: 'Launch', color: '#e53935' },
  { key: 'runtime', label: 'Other runtime', color: '#6d4c41' },
  { key: 'kernel', label: 'Kernel', color: '#1976d2' },
  { key: 'sync', label: 'Sync', color: '#8e24aa' },
  { key: 'idle', label: 'Idle', color: '#9e9e9e' },
  { key: 'backlog', label: 'Backlog (wait ≥ 1 ms)', color: '#ff8a65' },
]

export function CriticalPathCard({ path, theme, onShowOnTrace }: { path: CriticalPath; theme: Theme; onShowOnTrace?: (step: string) => void }) {
  const [shown, setShown] = useState(path.step ?? path.steps[0]?.step ?? '')
  const rows = path.steps.map((s) => (/^\d+$/.test(s.step) ? `Step ${s.step}` : s.step))
  const values = path.steps.map((s) => s.shares_us as unknown as Record<string, number>)
  const option = useMemo(() => stackedBars(rows, PATH, values, theme), [rows, values, theme])
  const kernel = path.steps.reduce((a, s) => a + s.shares_us.kernel, 0)
  const total = path.steps.reduce((a, s) => a + s.length_us, 0)
  return (
    <Card
      title="Critical path"
      subtitle={`Per step, us; kernels are ${pct(share(kernel, total))} of the path`}
      testId="gpu-idle-critical"
      actions={
        onShowOnTrace && path.steps.length > 0 ? (
          <div className="gi-crit-actions">
            <Select value={shown} onChange={setShown} options={path.steps.map((s) => ({ value: s.step, label: `Step ${s.step}` }))} testId="gpu-idle-critical-step" />
            <button type="button" className="button compact" onClick={() => onShowOnTrace(shown)} data-testid="gpu-idle-critical-show" title="Open the Trace view zoomed to this step, its critical path outlined and its edges drawn in order">
              Show on Trace
            </button>
          </div>
        ) : undefined
      }
    >
      {path.steps.length === 0 ? (
        <Empty title="No step with launches or device work" />
      ) : (
        <Chart option={option} height={60 + 28 * rows.length} label="Critical path per step" testId="gpu-idle-critical-chart" />
      )}
      {path.step !== null && (
        <p className="muted" data-testid="gpu-idle-critical-ids">
          {count(path.event_ids.length)} events on the path of step {path.step} (event ids in the payload&apos;s critical_path.event_ids). Show on Trace draws the path of the chosen step there.
          {path.truncated ? ' Only the first 64 steps are shown.' : ''}
        </p>
      )}
      <p className="formula" data-testid="formula">
        <span className="formula-label">Formula</span> {path.formula}
      </p>
    </Card>
  )
}
