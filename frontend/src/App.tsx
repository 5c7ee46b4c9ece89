import { useCallback, useEffect, useMemo, useRef, useState, type ReactNode } from 'react'
import { api, type RunInfo, type RunsResponse, type Selection, type SpanStatus, type WorkerStatus } from './api'
import { Banner, ErrorBanner, Field, Loading, ProgressBar, Select } from './components/ui'
import { count } from './format'
import { useAsync } from './hooks'
import { useTheme } from './theme'
import { useUrlState } from './urlState'
import { DiffExperimentSelectors } from './views/diff/DiffSelectors'
import { DiffView } from './views/diff/DiffView'
import { DistributedView } from './views/distributed/DistributedView'
import { KernelView } from './views/KernelView'
import { MemoryExportView, MemoryView } from './views/memory/MemoryView'
import { ModuleView } from './views/modules/ModuleView'
import { NoRuns } from './views/NoRuns'
import { OperatorView } from './views/OperatorView'
import { OverviewView } from './views/Overview'
import { TraceView } from './views/trace/TraceView'

const VIEW_LABELS: Record<string, string> = { Kernel: 'GPU Kernel' }
const SUPPORTED_VIEWS = new Set(['Overview', 'Operator', 'Kernel', 'Trace', 'Memory', 'Distributed', 'Module', 'Diff'])
/** Run-level views: one payload over all workers, so no worker selector. */
const RUN_LEVEL_VIEWS = new Set(['Distributed'])

function useRuns(): { data: RunsResponse | null; error: Error | null } {
  const [data, setData] = useState<RunsResponse | null>(null)
  const [error, setError] = useState<Error | null>(null)
  const busy = data === null || data.loading || data.runs.some((r) => r.state === 'loading')

  useEffect(() => {
    const controller = new AbortController()
    let timer: number | undefined
    const poll = () => {
      api.runs(controller.signal).then(
        (next) => {
          setData(next)
          setError(null)
          const again = next.loading || next.runs.some((r) => r.state === 'loading')
          timer = window.setTimeout(poll, again ? 1500 : 10000)
        },
        (err: Error) => {
          if (controller.signal.aborted) return
          setError(err)
          timer = window.setTimeout(poll, 5000)
        },
      )
    }
    poll()
    return () => {
      controller.abort()
      window.clearTimeout(timer)
    }
  }, [busy])

  return { data, error }
}

function pickOne(wanted: string, options: string[]): string {
  return options.includes(wanted) ? wanted : (options[0] ?? '')
}

export function App() {
  const theme = useTheme()
  const [state, update] = useUrlState()
  const { data: runsData, error: runsError } = useRuns()
  const runs = useMemo(() => runsData?.runs ?? [], [runsData])

  const runNames = runs.map((r) => r.name)
  const run: RunInfo | undefined = runs.find((r) => r.name === pickOne(state.run, runNames))
  const runName = run?.name ?? ''
  const runFingerprint = run ? `${run.state}:${run.workers.map((w) => `${w.name}=${w.spans.map((s) => s.state).join(',')}`).join(';')}` : ''

  // Views: from the runs payload when it lists them, otherwise from /views.
  const viewsState = useAsync(run && run.views.length === 0 && run.state !== 'loading' ? `${runName}\u0000${runFingerprint}` : null, (signal) => api.views(runName, signal))
  // While a run loads, only the views known from its file names are listed (Memory, from the
  // memory-timeline exports); every trace has an Overview, so start there: its 202 polling also
  // tells the server which file the user is waiting for.
  const loading = run?.state === 'loading'
  const listed = run?.views.length ? run.views : viewsState.status === 'ok' ? viewsState.data : []
  const views = loading && !listed.includes('Overview') ? ['Overview', ...listed] : listed
  const view = pickOne(state.view, views)

  const workersState = useAsync(run && view ? `${runName}\u0000${view}\u0000${runFingerprint}` : null, (signal) => api.workers(runName, view, signal))
  const viewWorkers = workersState.status === 'ok' ? workersState.data : workersState.status === 'pending' && workersState.previous ? workersState.previous : []
  // Workers whose files all failed offer no view, so /workers leaves them out; list them anyway
  // (flagged) so their error can be selected and read.
  const workers = useMemo(() => {
    const failed = (run?.workers ?? []).filter((w) => w.spans.length > 0 && w.spans.every((s) => s.state === 'error')).map((w) => w.name)
    const extra = failed.filter((w) => !viewWorkers.includes(w))
    return extra.length ? [...viewWorkers, ...extra].sort() : viewWorkers
  }, [run, viewWorkers])
  const worker = pickOne(state.worker, workers)

  const spansState = useAsync(run && worker ? `${runName}\u0000${worker}\u0000${runFingerprint}` : null, (signal) => api.spans(runName, worker, signal))
  const spans = spansState.status === 'ok' ? spansState.data : spansState.status === 'pending' && spansState.previous ? spansState.previous : []
  const span = pickOne(state.span, spans)

  // Write the resolved selection back, so the URL always names what is shown.
  useEffect(() => {
    if (!runsData) return
    const patch: Partial<typeof state> = {}
    if (runName && runName !== state.run) patch.run = runName
    if (view && view !== state.view && !loading) patch.view = view // a link's view waits for the load
    if (worker && worker !== state.worker) patch.worker = worker
    if (span && span !== state.span) patch.span = span
    if (Object.keys(patch).length) update(patch)
  }, [runsData, runName, view, worker, span, state, update, loading])

  const workerStatus: WorkerStatus | undefined = run?.workers.find((w) => w.name === worker)
  const spanStatus: SpanStatus | undefined = workerStatus?.spans.find((s) => s.span === span) ?? (workerStatus?.spans.length === 1 ? workerStatus.spans[0] : undefined)
  const selection: Selection | null = useMemo(() => (runName && worker && span ? { run: runName, worker, span } : null), [runName, worker, span])

  const navigate = useCallback((v: string) => update({ view: v }), [update])

  if (!runsData) {
    return (
      <Frame>
        <main className="main solo">{runsError ? <ErrorBanner error={runsError} what="the list of runs" /> : <Loading label="Looking for runs" />}</main>
      </Frame>
    )
  }

  if (runs.length === 0) {
    return (
      <Frame>
        <main className="main solo">
          {runsError && <ErrorBanner error={runsError} what="the list of runs" />}
          {runsData.loading ? <Loading label="Scanning the log directory" /> : <NoRuns logdir={runsData.logdir} />}
        </main>
      </Frame>
    )
  }

  return (
    <Frame>
      <aside className="sidebar" aria-label="Selection">
        <div className="sidebar-inner">
        <Field label="Run">
          {(id) => (
            <Select
              id={id}
              value={runName}
              onChange={(v) => update({ run: v })}
              options={runs.map((r) => ({ value: r.name, label: runLabel(r) }))}
              testId="run-select"
            />
          )}
        </Field>
        {run && run.state === 'loading' && (
          <div className="run-progress" data-testid="run-progress">
            <div className="run-progress-text">
              Loading {run.name} · {Math.round(run.progress * 100)}%
            </div>
            <ProgressBar value={run.progress} label={`Loading ${run.name}`} />
          </div>
        )}
        {!RUN_LEVEL_VIEWS.has(view) && (
        <Field label="Worker">
          {(id) => (
            <Select
              id={id}
              value={worker}
              onChange={(v) => update({ worker: v })}
              options={workers.map((w) => ({ value: w, label: workerLabel(w, run) }))}
              testId="worker-select"
              disabled={workers.length === 0}
            />
          )}
        </Field>
        )}
        {spans.length > 1 && (
          <Field label="Span">
            {(id) => (
              <Select id={id} value={span} onChange={(v) => update({ span: v })} options={spans.map((s) => ({ value: s, label: `Span ${s}` }))} testId="span-select" />
            )}
          </Field>
        )}
        {view === 'Diff' && <DiffExperimentSelectors runs={runs} state={state} update={update} />}
        <LoadingRuns runs={runs} />
        {run && <WorkerStatusList run={run} selectedWorker={worker} selectedSpan={span} onSelect={(w, s) => update({ worker: w, span: s })} />}
        <SidebarFooter logdir={runsData.logdir} />
        </div>
      </aside>

      <main className="main">
        {runsError && <ErrorBanner error={runsError} what="the list of runs" />}
        <nav className="tabs" role="tablist" aria-label="Views">
          {views.map((v) => (
            <button
              key={v}
              type="button"
              role="tab"
              aria-selected={v === view}
              className={`tab${v === view ? ' active' : ''}`}
              onClick={() => update({ view: v })}
              data-testid={`tab-${v}`}
            >
              {VIEW_LABELS[v] ?? v}
            </button>
          ))}
        </nav>
        <WorkerBanner worker={worker} status={spanStatus} spanCount={spans.length} />
        {run?.state === 'error' && !workerStatus && <Banner kind="error" title={`Run ${run.name} could not be loaded`} testId="run-error-banner" />}
        {!selection ? (
          workersState.status === 'error' ? (
            <ErrorBanner error={workersState.error} what="the workers" />
          ) : spansState.status === 'error' ? (
            <ErrorBanner error={spansState.error} what="the spans" />
          ) : run?.state === 'loading' || workersState.status === 'pending' || spansState.status === 'pending' ? (
            <Loading progress={run?.state === 'loading' ? run.progress : null} label={`Loading ${runName}`} />
          ) : view === 'Memory' && run?.workers.length === 0 ? (
            <MemoryExportView run={runName} theme={theme} />
          ) : (
            <Banner kind="info" title="Nothing to show yet">This run has no worker with the {view} view.</Banner>
          )
        ) : spanStatus?.state === 'error' ? null : (
          <ViewContent
            key={view}
            view={view}
            views={views}
            selection={selection}
            state={state}
            update={update}
            theme={theme}
            workerCount={run?.workers.length ?? workers.length}
            onNavigate={navigate}
          />
        )}
      </main>
    </Frame>
  )
}

function Frame({ children }: { children: ReactNode }) {
  return <div className="app">{children}</div>
}

function runLabel(r: RunInfo): string {
  if (r.state === 'loading') return `${r.name} (loading ${Math.round(r.progress * 100)}%)`
  if (r.state === 'error') return `${r.name} (error)`
  if (r.state === 'partial') return `${r.name} (partial)`
  return r.name
}

function workerLabel(name: string, run: RunInfo | undefined): string {
  const status = run?.workers.find((w) => w.name === name)
  if (!status) return name
  if (status.spans.some((s) => s.state === 'error')) return `${name} ⚠ error`
  const damaged = status.spans.find((s) => s.state === 'partial' || s.state === 'truncated')
  if (damaged) return `${name} ⚠ ${damaged.state}`
  return name
}

function ViewContent(props: {
  view: string
  views: string[]
  selection: Selection
  state: ReturnType<typeof useUrlState>[0]
  update: ReturnType<typeof useUrlState>[1]
  theme: ReturnType<typeof useTheme>
  workerCount: number
  onNavigate: (view: string) => void
}) {
  const { view, selection, theme } = props
  if (view === 'Memory') return <MemoryView selection={selection} state={props.state} update={props.update} theme={theme} />
  if (view === 'Distributed') return <DistributedView selection={selection} theme={theme} />
  if (view === 'Module') return <ModuleView selection={selection} />
  if (view === 'Diff') return <DiffView selection={selection} state={props.state} update={props.update} theme={theme} />
  if (view === 'Overview')
    return <OverviewView selection={selection} workerCount={props.workerCount} theme={theme} onNavigate={props.onNavigate} views={props.views} />
  if (view === 'Operator') return <OperatorView selection={selection} state={props.state} update={props.update} theme={theme} />
  if (view === 'Kernel') return <KernelView selection={selection} state={props.state} update={props.update} theme={theme} />
  if (view === 'Trace') return <TraceView selection={selection} theme={theme} />
  return (
    <Banner kind="info" title={`The ${view} view is not available in this version of the plugin`} testId="unsupported-view">
      {SUPPORTED_VIEWS.size ? `Available here: ${[...SUPPORTED_VIEWS].join(', ')}.` : null}
    </Banner>
  )
}

const STATE_TEXT: Record<string, string> = {
  queued: 'queued',
  loading: 'loading',
  ok: 'ok',
  partial: 'partial',
  truncated: 'truncated',
  error: 'error',
}

function WorkerBanner({ worker, status, spanCount }: { worker: string; status: SpanStatus | undefined; spanCount: number }) {
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

function LoadingRuns({ runs }: { runs: RunInfo[] }) {
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

function WorkerStatusList({
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

function SidebarFooter({ logdir }: { logdir: string }) {
  const [copied, setCopied] = useState(false)
  const timer = useRef<number | undefined>(undefined)
  useEffect(() => () => window.clearTimeout(timer.current), [])
  const copy = () => {
    const text = window.location.href
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
      <button type="button" className="button subtle" onClick={copy} title="Copy a link to exactly this view (run, worker, span, filters)" data-testid="copy-link">
        {copied ? 'Link copied' : 'Copy link to this view'}
      </button>
    </div>
  )
}
