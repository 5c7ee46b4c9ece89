// What the shell shows: the runs (polled), the server's view specs, and the run -> view ->
// worker -> span cascade resolved against the URL state, written back so the URL always names
// what is shown.
import { useQuery } from '@tanstack/react-query'
import { useEffect, useMemo } from 'react'
import { api, type RunInfo, type RunsResponse, type Selection, type SpanStatus, type ViewSpec, type WorkerStatus } from '../api'
import { useAsync } from '../hooks'
import type { UiState } from '../urlState'
import { VIEWS } from '../views/registry'

function busy(data: RunsResponse | undefined): boolean {
  return !data || data.loading || data.runs.some((r) => r.state === 'loading')
}

/** /runs, polled: every 1.5 s while something loads, every 10 s after, every 5 s after an error. */
export function useRuns(): { data: RunsResponse | null; error: Error | null } {
  const query = useQuery<RunsResponse, Error>({
    queryKey: ['runs'],
    queryFn: ({ signal }) => api.runs(signal),
    refetchInterval: (q) => (q.state.status === 'error' ? 5000 : busy(q.state.data) ? 1500 : 10000),
    refetchIntervalInBackground: true,
  })
  return { data: query.data ?? null, error: query.error }
}

/** The server's view registry (/viewspecs); empty until it answers, or if it cannot. */
export function useViewSpecs(): ViewSpec[] {
  const query = useQuery<ViewSpec[], Error>({
    queryKey: ['viewspecs'],
    queryFn: ({ signal }) => api.viewSpecs(signal),
    staleTime: Infinity,
  })
  return query.data ?? []
}

function pickOne(wanted: string, options: string[]): string {
  return options.includes(wanted) ? wanted : (options[0] ?? '')
}

/** Whether `view` shows one worker (a worker selector) rather than the whole run. */
export function isPerWorker(view: string, specs: ViewSpec[]): boolean {
  const spec = specs.find((s) => s.name === view)
  return !spec?.run_level || Boolean(VIEWS[view]?.perWorker)
}

export interface Resolved {
  run: RunInfo | undefined
  runName: string
  views: string[]
  view: string
  loading: boolean
  workers: string[]
  worker: string
  spans: string[]
  span: string
  workerStatus: WorkerStatus | undefined
  spanStatus: SpanStatus | undefined
  selection: Selection | null
  /** Why there is no selection yet: an error or a pending load of the workers or spans. */
  workersError: Error | null
  spansError: Error | null
  pending: boolean
}

/** The run -> views -> workers -> spans cascade for the URL state `state`. */
export function useSelection(runs: RunInfo[], ready: boolean, state: UiState, update: (patch: Partial<UiState>) => void): Resolved {
  const run = runs.find((r) => r.name === pickOne(state.run, runs.map((r) => r.name)))
  const runName = run?.name ?? ''
  const fingerprint = run ? `${run.state}:${run.workers.map((w) => `${w.name}=${w.spans.map((s) => s.state).join(',')}`).join(';')}` : ''

  // Views: from the runs payload when it lists them, otherwise from /views.
  const viewsState = useAsync('views', run && run.views.length === 0 && run.state !== 'loading' ? `${runName}\u0000${fingerprint}` : null, (signal) =>
    api.views(runName, signal),
  )
  // While a run loads, only the views known from its file names are listed (Memory, from the
  // memory-timeline exports); every trace has an Overview, so start there: its 202 polling also
  // tells the server which file the user is waiting for.
  const loading = run?.state === 'loading'
  const listed = run?.views.length ? run.views : viewsState.status === 'ok' ? viewsState.data : []
  const views = loading && !listed.includes('Overview') ? ['Overview', ...listed] : listed
  const view = pickOne(state.view, views)

  const workersState = useAsync('workers', run && view ? `${runName}\u0000${view}\u0000${fingerprint}` : null, (signal) => api.workers(runName, view, signal))
  // While the new list loads, keep only the previous workers that this run has: after a run
  // switch no request may go out with the previous run's worker (a 404 in the console).
  const runWorkers = useMemo(() => new Set((run?.workers ?? []).map((w) => w.name)), [run])
  const viewWorkers = workersState.status === 'ok' ? workersState.data : workersState.status === 'pending' ? workersState.previous?.filter((w) => runWorkers.has(w)) : undefined
  // Workers whose files all failed offer no view, so /workers leaves them out; list them anyway
  // (flagged) so their error can be selected and read.
  const workers = useMemo(() => {
    const offered = viewWorkers ?? []
    const failed = (run?.workers ?? []).filter((w) => w.spans.length > 0 && w.spans.every((s) => s.state === 'error')).map((w) => w.name)
    const extra = failed.filter((w) => !offered.includes(w))
    return extra.length ? [...offered, ...extra].sort() : offered
  }, [run, viewWorkers])
  const worker = pickOne(state.worker, workers)

  const spansState = useAsync('spans', run && worker ? `${runName}\u0000${worker}\u0000${fingerprint}` : null, (signal) => api.spans(runName, worker, signal))
  const workerSpans = run?.workers.find((w) => w.name === worker)?.spans.map((x) => x.span) ?? []
  const spans = spansState.status === 'ok' ? spansState.data : spansState.status === 'pending' && spansState.previous ? spansState.previous.filter((x) => workerSpans.includes(x)) : []
  const span = pickOne(state.span, spans)

  useEffect(() => {
    if (!ready) return
    const patch: Partial<UiState> = {}
    if (runName && runName !== state.run) patch.run = runName
    if (view && view !== state.view && !loading) patch.view = view // a link's view waits for the load
    if (worker && worker !== state.worker) patch.worker = worker
    if (span && span !== state.span) patch.span = span
    if (Object.keys(patch).length) update(patch)
  }, [ready, runName, view, worker, span, state, update, loading])

  const workerStatus = run?.workers.find((w) => w.name === worker)
  const spanStatus = workerStatus?.spans.find((s) => s.span === span) ?? (workerStatus?.spans.length === 1 ? workerStatus.spans[0] : undefined)
  const selection = useMemo(() => (runName && worker && span ? { run: runName, worker, span } : null), [runName, worker, span])
  return {
    run,
    runName,
    views,
    view,
    loading,
    workers,
    worker,
    spans,
    span,
    workerStatus,
    spanStatus,
    selection,
    workersError: workersState.status === 'error' ? workersState.error : null,
    spansError: spansState.status === 'error' ? spansState.error : null,
    pending: loading || workersState.status === 'pending' || spansState.status === 'pending',
  }
}
