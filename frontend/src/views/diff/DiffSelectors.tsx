// The experiment side of the Diff view, in the sidebar under the (baseline) run/worker/span.
// Defaults: another run than the baseline, the baseline's worker and span when it has them.
import { useEffect } from 'react'
import { api, type RunInfo } from '../../api'
import { Field, Select } from '../../components/ui'
import { useAsync } from '../../hooks'
import type { SelectionState } from '../../urlState'
import type { DiffState } from './state'

function pick(wanted: string, options: string[], fallback: string): string {
  if (options.includes(wanted)) return wanted
  if (options.includes(fallback)) return fallback
  return options[0] ?? ''
}

export function DiffExperimentSelectors({ runs, state, update }: { runs: RunInfo[]; state: DiffState & SelectionState; update: (patch: Partial<DiffState & SelectionState>) => void }) {
  const runNames = runs.filter((r) => r.state !== 'error').map((r) => r.name)
  const other = runNames.find((n) => n !== state.run) ?? state.run
  const expRun = pick(state.expRun, runNames, other)
  const workersState = useAsync('workers', expRun ? `diff-exp\u0000${expRun}` : null, (signal) => api.workers(expRun, 'Overview', signal))
  const workers = workersState.status === 'ok' ? workersState.data : []
  const expWorker = pick(state.expWorker, workers, state.worker)
  const spansState = useAsync('spans', expRun && expWorker ? `diff-exp\u0000${expRun}\u0000${expWorker}` : null, (signal) => api.spans(expRun, expWorker, signal))
  const spans = spansState.status === 'ok' ? spansState.data : []
  const expSpan = pick(state.expSpan, spans, state.span)

  // Write the resolved experiment back, so the URL names what is compared.
  useEffect(() => {
    const patch: Partial<DiffState & SelectionState> = {}
    if (expRun && expRun !== state.expRun) patch.expRun = expRun
    if (expWorker && expWorker !== state.expWorker && workers.length) patch.expWorker = expWorker
    if (expSpan && expSpan !== state.expSpan && spans.length) patch.expSpan = expSpan
    if (Object.keys(patch).length) update(patch)
  }, [expRun, expWorker, expSpan, workers.length, spans.length, state.expRun, state.expWorker, state.expSpan, update])

  return (
    <div className="side-section" data-testid="diff-selectors">
      <div className="side-title">Experiment</div>
      <div className="field-hint muted small">Compared with the baseline: the run, worker and span above.</div>
      <Field label="Run">
        {(id) => <Select id={id} value={expRun} onChange={(v) => update({ expRun: v, diffPath: '' })} options={runNames.map((n) => ({ value: n, label: n }))} testId="exp-run-select" />}
      </Field>
      <Field label="Worker">
        {(id) => (
          <Select
            id={id}
            value={expWorker}
            onChange={(v) => update({ expWorker: v, diffPath: '' })}
            options={workers.map((w) => ({ value: w, label: w }))}
            testId="exp-worker-select"
            disabled={workers.length === 0}
          />
        )}
      </Field>
      {spans.length > 1 && (
        <Field label="Span">
          {(id) => <Select id={id} value={expSpan} onChange={(v) => update({ expSpan: v, diffPath: '' })} options={spans.map((s) => ({ value: s, label: `Span ${s}` }))} testId="exp-span-select" />}
        </Field>
      )}
    </div>
  )
}
