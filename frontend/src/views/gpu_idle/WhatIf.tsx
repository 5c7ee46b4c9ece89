// The what-if panel: type an edit (or arrive with a recommendation's), see the step time the
// replay of each step's dependency model predicts (`whatif`, analysis/whatif).
import { useEffect, useState } from 'react'
import type { Selection } from '../../api'
import { Async } from '../../components/Async'
import { Card, Empty } from '../../components/ui'
import { duration, pct } from '../../format'
import { useAsync } from '../../hooks'
import { fetchWhatIf, fetchWhatIfRun, isRunEdit, type WhatIfPayload, type WhatIfRunPayload } from './api'

const EXAMPLES = ['launch=0', 'sync=0', 'dataloader=0', 'op:aten::mm=0.5', 'kernel~gemm=0.5']

export function WhatIfCard({ selection, edit, onEdit }: { selection: Selection; edit: string; onEdit: (edit: string) => void }) {
  const [draft, setDraft] = useState(edit)
  useEffect(() => setDraft(edit), [edit])
  return (
    <Card title="What if" testId="whatif">
      <p className="muted">
        Replays each step's dependencies (host order, launches, streams, synchronisation) with the times you change. Edits: <code>op:NAME</code>, <code>op~REGEX</code>, <code>kernel:NAME</code>, <code>kernel~REGEX</code>, <code>dataloader</code>, <code>communication</code>, <code>memcpy</code>, <code>launch</code>, <code>sync</code>, each <code>=FACTOR</code> (0 removes it), separated by <code>;</code>. Across the ranks of the span: <code>straggler</code>, <code>rank:NAME</code> (its lateness), <code>transfer</code> (<code>transfer=0</code>: communication fully overlapped).
      </p>
      <form
        className="whatif-form"
        onSubmit={(e) => {
          e.preventDefault()
          onEdit(draft.trim())
        }}
      >
        <input className="input" value={draft} onChange={(e) => setDraft(e.target.value)} placeholder={EXAMPLES.join('   ')} aria-label="What-if edit" data-testid="whatif-edit" />
        <button type="submit" className="button" data-testid="whatif-run" disabled={!draft.trim()}>
          Predict
        </button>
      </form>
      {edit && isRunEdit(edit) ? <RunPrediction selection={selection} edit={edit} /> : edit ? <Prediction selection={selection} edit={edit} /> : <Empty title="No edit yet">Try one of: {EXAMPLES.join(', ')}.</Empty>}
    </Card>
  )
}

function Prediction({ selection, edit }: { selection: Selection; edit: string }) {
  const key = `${selection.run}\u0000${selection.worker}\u0000${selection.span}\u0000${edit}`
  const state = useAsync('whatif', key, (signal) => fetchWhatIf(selection, edit, signal))
  return (
    <Async state={state} what="the what-if replay" label="Replaying the steps">
      {(data) => <Result data={data} />}
    </Async>
  )
}

function Result({ data }: { data: WhatIfPayload }) {
  return (
    <div data-testid="whatif-result">
      <p className="whatif-headline" data-testid="whatif-headline">
        {data.edits.join('; ')}: step time {duration(data.original_us)} → <strong>{duration(data.predicted_us)}</strong> ({data.saving_us >= 0 ? '−' : '+'}
        {pct(Math.abs(data.saving_pct))})
      </p>
      {data.notes.map((n) => (
        <p key={n} className="muted">
          {n}
        </p>
      ))}
      <table className="simple-table" data-testid="whatif-steps">
        <thead>
          <tr>
            <th>Step</th>
            <th className="right">Now</th>
            <th className="right">Predicted</th>
            <th className="right">Saving</th>
            <th className="right">Waiting for the device (now → predicted)</th>
          </tr>
        </thead>
        <tbody>
          {data.steps.map((s) => (
            <tr key={s.step}>
              <td>{s.step}</td>
              <td className="right">{duration(s.original_us)}</td>
              <td className="right">{duration(s.predicted_us)}</td>
              <td className="right">{pct(s.saving_pct)}</td>
              <td className="right">
                {duration(s.wait_us)} → {duration(s.predicted_wait_us)}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}

function RunPrediction({ selection, edit }: { selection: Selection; edit: string }) {
  const key = `${selection.run}\u0000${selection.span}\u0000${edit}`
  const state = useAsync('whatif/run', key, (signal) => fetchWhatIfRun(selection, edit, signal))
  return (
    <Async state={state} what="the run-level what-if replay" label="Replaying the ranks">
      {(data) => <RunResult data={data} />}
    </Async>
  )
}

function RunResult({ data }: { data: WhatIfRunPayload }) {
  return (
    <div data-testid="whatif-result">
      <p className="whatif-headline" data-testid="whatif-headline">
        {data.resolved.join('; ')}: step time {duration(data.replayed_us)} → <strong>{duration(data.predicted_us)}</strong> ({data.saving_us >= 0 ? '−' : '+'}
        {pct(Math.abs(data.saving_pct))}) over {data.ranks.length} ranks; the last rank {data.last ?? 'none'} → {data.new_last ?? 'none'}
      </p>
      {data.notes.map((n) => (
        <p key={n} className="muted">
          {n}
        </p>
      ))}
      <table className="simple-table" data-testid="whatif-ranks">
        <thead>
          <tr>
            <th>Rank</th>
            <th className="right">Measured</th>
            <th className="right">Replayed</th>
            <th className="right">Predicted</th>
            <th className="right">Saving</th>
            <th className="right">Waiting for other ranks (now → predicted)</th>
          </tr>
        </thead>
        <tbody>
          {data.ranks.map((r) => (
            <tr key={r.worker}>
              <td>{r.worker}</td>
              <td className="right">{duration(r.original_us)}</td>
              <td className="right">{duration(r.replayed_us)}</td>
              <td className="right">{duration(r.predicted_us)}</td>
              <td className="right">{pct(r.saving_pct)}</td>
              <td className="right">
                {duration(r.wait_us)} → {duration(r.predicted_wait_us)}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}
