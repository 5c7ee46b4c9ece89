// The shell's sidebar pieces: run/worker labels, the loading runs, the workers' span states,
// the worker banner and the footer (log directory, copy link).
import { useEffect, useRef, useState } from 'react'
import type { RunInfo, SpanStatus } from '../api'
import { Banner, ProgressBar } from '../components/ui'
import { count } from '../format'
import { shareableUrl, type UiState } from '../urlState'

export function runLabel(r: RunInfo): string {
  if (r.state === 'loading') return `${r.name} (loading ${Math.round(r.progress * 100)}%)`
  if (r.state === 'error') return `${r.name} (error)`
  if (r.state === 'partial') return `${r.name} (partial)`
  return r.name
}

export function workerLabel(name: string, run: RunInfo | undefined): string {
  const status = run?.workers.find((w) => w.name === name)
  if (!status) return name
  if (status.spans.some((s) => s.state === 'error')) return `${name} ⚠ error`
  const damaged = status.spans.find((s) => s.state === 'partial' || s.state === 'truncated')
  if (damaged) return `${name} ⚠ ${damaged.state}`
  return name
}

const STATE_TEXT: Record<string, string> = {
  queued: 'queued',
  loading: 'loading',
  ok: 'ok',
  partial: 'partial',
  truncated: 'truncated',
  error: 'error',
}

export function WorkerBanner({ worker, status, spanCount }: { worker: string; status: SpanStatus | undefined; spanCount: number }) {
  if (!status) return null
  const where = spanCount > 1 ? `${worker}, span ${status.span}` : worker
  const messages = status.messages.length ? (
    <ul className="messages" data-testid="worker-messages">
      {status.messages.slice(0, 20).map((m, i) => (
        <li key={i}>{m}</li>
      ))}
      {status.messages.length > 20 && <li>… and {count(status.messages.length - 20)} more</li>}
    </ul>
  ) : null
  if (status.state === 'error')
    return (
      <Banner kind="error" title={`Worker ${where} could not be read`} testId="worker-error-banner">
        {messages ?? 'The trace file could not be parsed.'}
        <div className="banner-hint">The other workers of this run are not affected; pick one on the left.</div>
      </Banner>
    )
  if (status.state === 'partial' || status.state === 'truncated')
    return (
      <Banner
        kind="warning"
        title={status.state === 'truncated' ? `The trace of ${where} is truncated; the views show what could be read` : `Some events of ${where} could not be read`}
        testId="worker-warning-banner"
      >
        {messages}
      </Banner>
    )
  return null
}

export function LoadingRuns({ runs }: { runs: RunInfo[] }) {
  const loading = runs.filter((r) => r.state === 'loading')
  if (loading.length === 0) return null
  return (
    <div className="side-section" data-testid="loading-runs">
      <div className="side-title">Loading</div>
      {loading.map((r) => (
        <div key={r.name} className="loading-run">
          <div className="loading-run-top">
            <span className="ellipsis">{r.name}</span>
            <span className="mono">{Math.round(r.progress * 100)}%</span>
          </div>
          <ProgressBar value={r.progress} label={`Loading ${r.name}`} />
        </div>
      ))}
    </div>
  )
}

export function WorkerStatusList({
  run,
  selectedWorker,
  selectedSpan,
  onSelect,
}: {
  run: RunInfo
  selectedWorker: string
  selectedSpan: string
  onSelect: (worker: string, span: string) => void
}) {
  if (run.workers.length === 0) return null
  return (
    <div className="side-section" data-testid="worker-status">
      <div className="side-title">Workers in {run.name}</div>
      <ul className="status-list">
        {run.workers.map((w) => {
          const problems = w.spans.filter((s) => s.messages.length > 0 && s.state !== 'ok')
          return (
            <li key={w.name} className={w.name === selectedWorker ? 'selected' : ''} data-worker={w.name}>
              <div className="status-worker ellipsis" title={w.name}>
                {w.name}
              </div>
              <div className="status-spans">
                {w.spans.map((s) => (
                  <button
                    key={s.span}
                    type="button"
                    className={`span-chip state-${s.state}${w.name === selectedWorker && s.span === selectedSpan ? ' current' : ''}`}
                    title={`Span ${s.span}: ${STATE_TEXT[s.state] ?? s.state}${s.events != null ? `, ${count(s.events)} events` : ''}${s.messages.length ? `\n${s.messages.slice(0, 3).join('\n')}` : ''}`}
                    onClick={() => onSelect(w.name, s.span)}
                    data-state={s.state}
                  >
                    {s.span === 'default' ? '•' : s.span}
                  </button>
                ))}
              </div>
              {problems.length > 0 && (
                <div className="status-messages" data-testid="status-messages">
                  {problems.slice(0, 3).map((s) => (
                    <div key={s.span} className={`status-message state-${s.state}`}>
                      <span className="status-message-span">{w.spans.length > 1 ? `Span ${s.span}: ` : ''}</span>
                      {s.messages[0]}
                      {s.messages.length > 1 ? ` (+${s.messages.length - 1} more)` : ''}
                    </div>
                  ))}
                </div>
              )}
            </li>
          )
        })}
      </ul>
    </div>
  )
}

export function SidebarFooter({ logdir, state }: { logdir: string; state: UiState }) {
  const [copied, setCopied] = useState(false)
  const timer = useRef<number | undefined>(undefined)
  useEffect(() => () => window.clearTimeout(timer.current), [])
  const copy = () => {
    const text = shareableUrl(state)
    const done = () => {
      setCopied(true)
      window.clearTimeout(timer.current)
      timer.current = window.setTimeout(() => setCopied(false), 1500)
    }
    navigator.clipboard?.writeText(text).then(done, () => window.prompt('Link to this view', text))
  }
  return (
    <div className="side-footer">
      {logdir && (
        <div className="logdir" title={logdir}>
          <span className="muted">Log directory</span>
          <span className="ellipsis mono">{logdir}</span>
        </div>
      )}
      <button type="button" className="button subtle" onClick={copy} title="Copy a TensorBoard link that opens exactly this view (run, worker, span, filters)" data-testid="copy-link">
        {copied ? 'Link copied' : 'Copy link to this view'}
      </button>
    </div>
  )
}
