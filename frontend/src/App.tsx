import { useCallback, useMemo, type ReactNode } from 'react'
import { LoadingRuns, runLabel, SidebarFooter, WorkerBanner, workerLabel, WorkerStatusList } from './app/Sidebar'
import { isPerWorker, useRuns, useSelection, useViewSpecs, type Resolved } from './app/selection'
import { CaptureButton } from './capture/CaptureDialog'
import { NoRuns } from './components/NoRuns'
import { Banner, ErrorBanner, Field, Loading, ProgressBar, Select } from './components/ui'
import { useTheme } from './theme'
import { useUrlState, type UiState } from './urlState'
import { DiffExperimentSelectors } from './views/diff/DiffSelectors'
import { MemoryExportView } from './views/memory/MemoryView'
import { VIEWS, type ViewProps } from './views/registry'

export function App() {
  const theme = useTheme()
  const [state, update] = useUrlState()
  const { data: runsData, error: runsError } = useRuns()
  const specs = useViewSpecs()
  const runs = useMemo(() => runsData?.runs ?? [], [runsData])
  const sel = useSelection(runs, runsData !== null, state, update)
  const { run, runName, view, views, worker, workers, span, spans } = sel
  const navigate = useCallback((v: string, patch?: Partial<UiState>) => update({ ...patch, view: v }), [update])

  // Installation problems found at the plugin's start-up (the old torch-tb-profiler installed).
  const notices = (runsData?.notices ?? []).map((text) => (
    <Banner key={text} kind="warning" title="The old PyTorch profiler plugin is also installed" testId="migration-banner">
      {text}
    </Banner>
  ))

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
          {notices}
          {runsError && <ErrorBanner error={runsError} what="the list of runs" />}
          {runsData.loading ? <Loading label="Scanning the log directory" /> : <NoRuns logdir={runsData.logdir} />}
          {!runsData.loading && <CaptureButton />}
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
                onChange={(v) => update({ run: v, tWin: '' })}
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
          {isPerWorker(view, specs) && run?.workers.length !== 0 && (
            <Field label="Worker">
              {(id) => (
                <Select
                  id={id}
                  value={worker}
                  onChange={(v) => update({ worker: v, tWin: '' })}
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
                <Select id={id} value={span} onChange={(v) => update({ span: v, tWin: '' })} options={spans.map((s) => ({ value: s, label: `Span ${s}` }))} testId="span-select" />
              )}
            </Field>
          )}
          {view === 'Diff' && <DiffExperimentSelectors runs={runs} state={state} update={update} />}
          <LoadingRuns runs={runs} />
          {run && <WorkerStatusList run={run} selectedWorker={worker} selectedSpan={span} onSelect={(w, s) => update({ worker: w, span: s, tWin: '' })} />}
          <CaptureButton />
          <SidebarFooter logdir={runsData.logdir} state={state} />
        </div>
      </aside>

      <main className="main">
        {notices}
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
              {VIEWS[v]?.label ?? v}
            </button>
          ))}
        </nav>
        <WorkerBanner worker={worker} status={sel.spanStatus} spanCount={spans.length} />
        {run?.state === 'error' && !sel.workerStatus && <Banner kind="error" title={`Run ${run.name} could not be loaded`} testId="run-error-banner" />}
        {sel.selection ? (
          sel.spanStatus?.state === 'error' ? null : (
            <ViewContent
              key={view}
              view={view}
              views={views}
              selection={sel.selection}
              state={state}
              update={update}
              theme={theme}
              workerCount={run?.workers.length ?? workers.length}
              hasMemoryExport={sel.spanStatus?.memory_timeline}
              onNavigate={navigate}
            />
          )
        ) : (
          <NoSelection sel={sel} theme={theme} />
        )}
      </main>
    </Frame>
  )
}

/** What the main pane shows while the cascade has not resolved a worker and span. */
function NoSelection({ sel, theme }: { sel: Resolved; theme: ViewProps['theme'] }) {
  if (sel.workersError) return <ErrorBanner error={sel.workersError} what="the workers" />
  if (sel.spansError) return <ErrorBanner error={sel.spansError} what="the spans" />
  if (sel.pending) return <Loading progress={sel.loading ? (sel.run?.progress ?? null) : null} label={`Loading ${sel.runName}`} />
  if (sel.view === 'Memory' && sel.run?.workers.length === 0) return <MemoryExportView run={sel.runName} theme={theme} />
  return (
    <Banner kind="info" title="Nothing to show yet">
      This run has no worker with the {sel.view} view.
    </Banner>
  )
}

function Frame({ children }: { children: ReactNode }) {
  return <div className="app">{children}</div>
}

function ViewContent(props: ViewProps & { view: string }) {
  const entry = VIEWS[props.view]
  if (entry) return <entry.component {...props} />
  return (
    <Banner kind="info" title={`The ${props.view} view is not available in this version of the plugin`} testId="unsupported-view">
      Available here: {Object.keys(VIEWS).join(', ')}.
    </Banner>
  )
}
