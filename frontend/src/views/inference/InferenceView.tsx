// Inference view (one worker span of a vLLM or SGLang serving trace): per step the phase and
// batch/token counts read from the engine's step annotations, the steady-state window, and per
// phase the time by op category, per-token latency and memory-bandwidth utilization. Every
// rule is stated from the payload (`formulas`), so the UI and the README cannot drift.
import { useState } from 'react'
import type { Selection } from '../../api'
import { Async } from '../../components/Async'
import { DataTable, type Column, type SortState } from '../../components/DataTable'
import { StatCard } from '../../components/StatCard'
import { useViewStyle } from '../../components/style'
import { Banner, Card, DownloadLink } from '../../components/ui'
import { bytes, count, duration, num2, pct } from '../../format'
import { useAsync } from '../../hooks'
import { fetchInference, inferenceCsvUrl, type InferencePayload, type PhaseRow, type StepRow } from './api'
import css from './inference.css?inline'

export function InferenceView({ selection }: { selection: Selection }) {
  useViewStyle('inference', css)
  const key = `${selection.run}\u0000${selection.worker}\u0000${selection.span}`
  const state = useAsync('inference', key, (signal) => fetchInference(selection, signal))
  return (
    <Async state={state} what="the Inference view" label="Reading serving steps">
      {(data) => <Content data={data} csvUrl={inferenceCsvUrl(selection)} />}
    </Async>
  )
}

function Content({ data, csvUrl }: { data: InferencePayload; csvUrl: string }) {
  const s = data.steady
  return (
    <div className="view inference" data-testid="inference-view">
      {data.notes.length > 0 && (
        <Banner kind="info" title="Notes" testId="inference-notes">
          {data.notes.map((n, i) => (
            <p key={i}>{n}</p>
          ))}
        </Banner>
      )}
      <Card title="Steady-state window" subtitle={data.formulas.steady} testId="inference-steady">
        <div className="stats">
          <StatCard label="Steps" value={count(data.total_steps)} testId="inference-total-steps" />
          <StatCard label="Steady" value={count(s.steps)} sub={s.first_step === null ? 'none' : `steps ${s.first_step} to ${s.last_step}`} testId="inference-steady-steps" />
          <StatCard label="Warm-up" value={count(s.warmup)} testId="inference-warmup" />
          <StatCard label="Graph capture" value={count(s.capture)} testId="inference-capture" />
          <StatCard label="Idle" value={count(s.idle)} testId="inference-idle" />
          <StatCard label="Peak HBM bandwidth" value={data.device.memory_tbps === null ? 'unknown' : `${num2(data.device.memory_tbps)} TB/s`} sub={data.device.peaks_model ?? data.device.name ?? ''} testId="inference-peak" />
        </div>
      </Card>
      {data.phases.map((p) => (
        <PhaseCard key={p.phase} phase={p} />
      ))}
      <StepsCard steps={data.steps} total={data.total_steps} csvUrl={csvUrl} />
      <Card title="How each number is made" testId="inference-formulas">
        <ul className="formulas">
          {Object.entries(data.formulas).map(([k, v]) => (
            <li key={k}>
              <b>{k}</b>: {v}
            </li>
          ))}
        </ul>
      </Card>
    </div>
  )
}

function PhaseCard({ phase: p }: { phase: PhaseRow }) {
  const decode = p.phase === 'decode'
  return (
    <Card title={`Phase: ${p.phase}`} subtitle={`${count(p.steps)} steady step(s)`} testId={`inference-phase-${p.phase}`}>
      <div className="stats">
        <StatCard label="Mean step time" value={duration(p.mean_step_us)} testId={`phase-${p.phase}-step`} />
        {decode && <StatCard label="Inter-token latency" value={duration(p.inter_token_latency_us)} sub="mean decode step" testId={`phase-${p.phase}-itl`} />}
        <StatCard label="Time per token" value={duration(p.us_per_token)} sub={`${count(p.tokens)} tokens`} testId={`phase-${p.phase}-per-token`} />
        <StatCard label="Tokens / s" value={p.tokens_per_s === null ? '-' : count(Math.round(p.tokens_per_s))} testId={`phase-${p.phase}-tps`} />
        <StatCard label="Mean batch" value={p.mean_requests === null ? '-' : num2(p.mean_requests)} sub="requests" testId={`phase-${p.phase}-batch`} />
        <StatCard
          label="HBM bandwidth"
          value={p.bandwidth_pct === null ? 'not estimable' : pct(p.bandwidth_pct)}
          sub={p.bandwidth_tbps === null ? 'see the steps table' : `${num2(p.bandwidth_tbps)} TB/s, ${bytes(p.mean_bytes)} per step`}
          testId={`phase-${p.phase}-bandwidth`}
        />
      </div>
      <table className="simple-table" data-testid={`phase-${p.phase}-categories`}>
        <caption className="phase-title">Device time by op category</caption>
        <thead>
          <tr>
            <th>Category</th>
            <th>Time</th>
            <th>Share</th>
          </tr>
        </thead>
        <tbody>
          {p.categories
            .filter((c) => c.time_us > 0)
            .map((c) => (
              <tr key={c.category}>
                <td>{c.category}</td>
                <td>{duration(c.time_us)}</td>
                <td>{pct(c.pct)}</td>
              </tr>
            ))}
        </tbody>
      </table>
    </Card>
  )
}

const COLUMNS: Column<StepRow>[] = [
  { key: 'step', header: 'Step', width: '64px', align: 'right', render: (r) => r.step, sortValue: (r) => r.step, descFirst: false },
  { key: 'phase', header: 'Phase', width: '88px', render: (r) => r.phase, sortValue: (r) => r.phase },
  { key: 'state', header: 'State', width: '88px', render: (r) => r.state, sortValue: (r) => r.state },
  { key: 'requests', header: 'Requests', width: '92px', align: 'right', render: (r) => count(r.requests), sortValue: (r) => r.requests },
  { key: 'tokens', header: 'Tokens', width: '92px', align: 'right', render: (r) => count(r.tokens), sortValue: (r) => r.tokens },
  { key: 'kv_tokens', header: 'KV tokens', title: 'Σ N_KV attended (sk)', width: '100px', align: 'right', render: (r) => count(r.kv_tokens), sortValue: (r) => r.kv_tokens },
  { key: 'gpu_us', header: 'GPU time', title: 'Union of the step’s device events', width: '104px', align: 'right', render: (r) => duration(r.gpu_us), sortValue: (r) => r.gpu_us },
  { key: 'host_us', header: 'Host time', title: 'The step annotation’s duration', width: '104px', align: 'right', render: (r) => duration(r.host_us), sortValue: (r) => r.host_us },
  { key: 'us_per_token', header: 'Per token', width: '96px', align: 'right', render: (r) => duration(r.us_per_token), sortValue: (r) => r.us_per_token },
  { key: 'bandwidth_pct', header: 'HBM %', title: 'Estimated bytes / GPU time / peak HBM bandwidth', width: '84px', align: 'right', render: (r) => (r.bandwidth_pct === null ? '-' : pct(r.bandwidth_pct)), sortValue: (r) => r.bandwidth_pct, cellTitle: (r) => r.bytes_reason ?? undefined },
  { key: 'name', header: 'Annotation', width: 'minmax(240px, 3fr)', render: (r) => r.name, sortValue: (r) => r.name, cellTitle: (r) => r.name },
]

function StepsCard({ steps, total, csvUrl }: { steps: StepRow[]; total: number; csvUrl: string }) {
  const [sort, setSort] = useState<SortState | null>({ key: 'step', desc: false })
  return (
    <Card title="Steps" subtitle={steps.length < total ? `first ${count(steps.length)} of ${count(total)}` : `${count(total)} step(s)`} actions={<DownloadLink href={csvUrl} testId="inference-csv" />} testId="inference-steps">
      <DataTable columns={COLUMNS} rows={steps} rowKey={(r) => String(r.step)} sort={sort} onSort={setSort} label="Serving steps" testId="inference-steps-table" maxHeight={400} />
    </Card>
  )
}
