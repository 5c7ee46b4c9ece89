// "Capture profile": ask a running job that listens (Recorder(..., on_demand=True)) to record its
// next N steps, then follow every worker's status until the traces are written. The server only
// writes requests when TensorBoard was started with TORCH_PROF_ALLOW_CAPTURE=1; otherwise the
// dialog says so and cannot submit. New spans appear in the sidebar by themselves (/runs polling).
import { useQuery } from '@tanstack/react-query'
import { useEffect, useRef, useState } from 'react'
import { ApiError, type CaptureAccepted } from '../api'
import { Banner, Field, Select } from '../components/ui'
import { answerText, captureApi } from './api'

const MAX_STEPS = 1000

export function CaptureButton() {
  const [open, setOpen] = useState(false)
  return (
    <>
      <button type="button" className="button subtle capture-open" onClick={() => setOpen(true)} data-testid="capture-open">
        Capture profile…
      </button>
      {open && <CaptureDialog onClose={() => setOpen(false)} />}
    </>
  )
}

function CaptureDialog({ onClose }: { onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null)
  useEffect(() => {
    const node = dialog.current
    if (node && !node.open) node.showModal()
  }, [])
  const targets = useQuery({ queryKey: ['capture/targets'], queryFn: ({ signal }) => captureApi.targets(signal), refetchInterval: 3000 })
  const runs = targets.data?.runs ?? []
  const [run, setRun] = useState('')
  const [steps, setSteps] = useState('5')
  const [withStack, setWithStack] = useState(false)
  const [snapshot, setSnapshot] = useState(false)
  const [accepted, setAccepted] = useState<CaptureAccepted | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [sending, setSending] = useState(false)
  const chosen = runs.some((r) => r.run === run) ? run : (runs[0]?.run ?? '')
  const stepCount = Number(steps)
  const stepsValid = Number.isInteger(stepCount) && stepCount >= 1 && stepCount <= MAX_STEPS
  const enabled = targets.data?.enabled === true

  const submit = async () => {
    setError(null)
    setSending(true)
    try {
      setAccepted(await captureApi.request({ run: chosen, steps: stepCount, with_stack: withStack, memory_snapshot: snapshot, record_shapes: true, profile_memory: true }))
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err))
    } finally {
      setSending(false)
    }
  }

  return (
    <dialog ref={dialog} className="capture-dialog" onClose={onClose} data-testid="capture-dialog" aria-labelledby="capture-title">
      <h2 id="capture-title">Capture profile</h2>
      {targets.error && <Banner kind="error" title="Cannot ask the server which runs listen">{(targets.error as Error).message}</Banner>}
      {targets.data && targets.data.message && (
        <Banner kind={enabled ? 'info' : 'warning'} title={enabled ? 'No job listens' : 'Capture is disabled'} testId="capture-message">
          {targets.data.message}
        </Banner>
      )}
      {accepted ? (
        <CaptureProgressView accepted={accepted} />
      ) : (
        <form
          method="dialog"
          onSubmit={(event) => {
            event.preventDefault()
            void submit()
          }}
        >
          <Field label="Run">
            {(id) => (
              <Select
                id={id}
                value={chosen}
                onChange={setRun}
                options={runs.map((r) => ({ value: r.run, label: `${r.run} (${r.workers.length} worker${r.workers.length === 1 ? '' : 's'})` }))}
                testId="capture-run"
                disabled={runs.length === 0}
              />
            )}
          </Field>
          <Field label="Steps" hint={stepsValid ? 'recorded after one warm-up step' : `1 to ${MAX_STEPS}`}>
            {(id) => (
              <input
                id={id}
                className={`input narrow${stepsValid ? '' : ' invalid'}`}
                type="number"
                min={1}
                max={MAX_STEPS}
                value={steps}
                onChange={(e) => setSteps(e.target.value)}
                data-testid="capture-steps"
              />
            )}
          </Field>
          <label className="capture-option">
            <input type="checkbox" checked={withStack} onChange={(e) => setWithStack(e.target.checked)} data-testid="capture-stack" /> Python stacks (module view)
          </label>
          <label className="capture-option">
            <input type="checkbox" checked={snapshot} onChange={(e) => setSnapshot(e.target.checked)} data-testid="capture-snapshot" /> CUDA memory snapshot
          </label>
          {error && (
            <Banner kind="error" title="The request was refused" testId="capture-error">
              {error}
            </Banner>
          )}
          <div className="capture-actions">
            <button type="button" className="button subtle" onClick={() => dialog.current?.close()}>
              Cancel
            </button>
            <button type="submit" className="button" disabled={!enabled || !chosen || !stepsValid || sending} data-testid="capture-submit">
              Capture
            </button>
          </div>
        </form>
      )}
      {accepted && (
        <div className="capture-actions">
          <button type="button" className="button" onClick={() => dialog.current?.close()} data-testid="capture-close">
            Close
          </button>
        </div>
      )}
    </dialog>
  )
}

function CaptureProgressView({ accepted }: { accepted: CaptureAccepted }) {
  const status = useQuery({
    queryKey: ['capture/status', accepted.id],
    queryFn: ({ signal }) => captureApi.status(accepted.id, signal),
    refetchInterval: (query) => (query.state.data?.done ? false : 1000),
  })
  const workers = status.data?.workers ?? []
  const waiting = accepted.expected - workers.length
  return (
    <div className="capture-progress" data-testid="capture-progress">
      <div className="muted">
        Request {accepted.id} to {accepted.run}: {accepted.expected} worker{accepted.expected === 1 ? '' : 's'}
        {status.data?.done ? ' answered; the new spans appear in the sidebar.' : '…'}
      </div>
      <ul className="capture-workers">
        {workers.map((w) => (
          <li key={w.worker} className={`capture-state-${w.state}`} data-state={w.state}>
            <span className="mono">{w.worker}</span>: {answerText(w)}
          </li>
        ))}
        {waiting > 0 && <li className="muted">{waiting} waiting for the job to see the request</li>}
      </ul>
      {status.error && <Banner kind="error" title="Cannot read the status">{(status.error as Error).message}</Banner>}
    </div>
  )
}
