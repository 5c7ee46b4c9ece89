// The experiment side of the Diff view, in the sidebar under the (baseline) run/worker/span.
// Default: what the server proposes (`diff/default`: the same worker's other span, else another
// worker of the run, else the run with the most similar operators), said in words.
import { useEffect } from 'react'
import { api, type RunInfo, type Selection } from '../../api'
import { Field, Select } from '../../components/ui'
import { useAsync } from '../../hooks'
import type { SelectionState } from '../../urlState'
import { fetchDiffDefault } from './api'
import type { DiffState } from './state'

function pick(wanted: string, options: string[], fallback: string): string {
  if (options.includes(wanted)) return wanted
  if (options.includes(fallback)) return fallback
  return options[0] ?? ''
}

type Props = { runs: RunInfo[]; state: DiffState & SelectionState; update: (patch: Partial<DiffState & SelectionState>) => void }

export function DiffExperimentSelectors({ runs, state, update }: Props) {
  const runNames = runs.filter((r) => r.state !== 'error').map((r) => r.name)
  const base: Selection | null = state.run && state.worker && state.span ? { run: state.run, worker: state.worker, span: state.span } : null
  const proposed = useAsync('diff/default', base ? `${base.run}\u0000${base.worker}\u0000${base.span}` : null, (signal) => fetchDiffDefault(base!, signal))
  const suggestion = proposed.status === 'ok' && proposed.data.run ? proposed.data : null
  const waiting = !state.expRun && proposed.status === 'pending'
  const expRun = waiting ? '' : pick(state.expRun, runNames, suggestion?.run ?? state.run)
  const workersState = useAsync('workers', expRun ? `diff-exp\u0000${expRun}` : null, (signal) => api.workers(expRun, 'Overview', signal))
  const workers = workersState.status === 'ok' ? workersState.data : []
  const fromSuggestion = suggestion && suggestion.run === expRun
  const expWorker = pick(state.expWorker, workers, fromSuggestion ? (suggestion.worker ?? state.worker) : state.worker)
  const spansState = useAsync('spans', expRun && expWorker ? `diff-exp\u0000${expRun}\u0000${expWorker}` : null, (signal) => api.spans(expRun, expWorker, signal))
  const spans = spansState.status === 'ok' ? spansState.data : []
  const expSpan = pick(state.expSpan, spans, fromSuggestion && suggestion.worker === expWorker ? (suggestion.span ?? state.span) : state.span)

  // Write the resolved experiment back, so the URL names what is compared.
  useEffect(() => {
    const patch: Partial<DiffState & SelectionState> = {}
    if (expRun && expRun !== state.expRun) patch.expRun = expRun
    if (expWorker && expWorker !== state.expWorker && workers.length) patch.expWorker = expWorker
    if (expSpan && expSpan !== state.expSpan && spans.length) patch.expSpan = expSpan
    if (Object.keys(patch).length) update(patch)
  }, [expRun, expWorker, expSpan, workers.length, spans.length, state.expRun, state.expWorker, state.expSpan, update])

  const isSuggested = suggestion && suggestion.run === expRun && suggestion.worker === expWorker && suggestion.span === expSpan
  return (
    <div className="side-section" data-testid="diff-selectors">
      <div className="side-title">Experiment</div>
      <div className="field-hint muted small" data-testid="diff-default-hint">
        {isSuggested ? `Proposed: ${suggestion.message}.` : 'Compared with the baseline: the run, worker and span above.'}
      </div>
      <Field label="Run">
        {(id) => <Select id={id} value={expRun} onChange={(v) => update({ expRun: v, expWorker: '', expSpan: '', diffPath: '' })} options={runNames.map((n) => ({ value: n, label: n }))} testId="exp-run-select" />}
      </Field>
      {workers.length > 0 && (
        <Field label="Worker">
          {(id) => <Select id={id} value={expWorker} onChange={(v) => update({ expWorker: v, expSpan: '', diffPath: '' })} options={workers.map((w) => ({ value: w, label: w }))} testId="exp-worker-select" />}
        </Field>
      )}
      {spans.length > 1 && (
        <Field label="Span">
          {(id) => <Select id={id} value={expSpan} onChange={(v) => update({ expSpan: v, diffPath: '' })} options={spans.map((s) => ({ value: s, label: `Span ${s}` }))} testId="exp-span-select" />}
        </Field>
      )}
    </div>
  )
}
