// The selected event's details (timeline/event): fields, all args, correlated launch/kernel
// partners, flows and parent as links that select and reveal them.

import type { ReactNode } from 'react'
import { ErrorBanner } from '../../components/ui'
import type { EventDetails, Partner, TrackInfo } from './api'
import { fmtDuration, fmtTime } from './timefmt'

export type DetailsState = { status: 'none' } | { status: 'pending'; id: number; name?: string } | { status: 'ok'; data: EventDetails } | { status: 'error'; id: number; error: Error }

interface Props {
  state: DetailsState
  tracks: TrackInfo[]
  traceStart: number
  onJump: (target: { id: number; partner?: Partner }) => void
  onClose: () => void
  onZoom: () => void
}

const KNOWN = new Set(['id', 'name', 'ts', 'dur', 'ph', 'cat', 'pid', 'tid', 'external_id', 'correlation', 'kind', 'args', 'track', 'depth', 'parent', 'drawn_end_us', 'correlated', 'flows'])
const ARG_GROUPS: Record<string, string> = { op_args: 'Operator', device_args: 'Device', python_args: 'Python' }
const KIND_LABELS: Record<string, string> = {
  cpu_op: 'CPU op',
  kernel: 'Kernel',
  memcpy: 'Memcpy',
  memset: 'Memset',
  runtime: 'Runtime',
  user_annotation: 'User annotation',
  gpu_user_annotation: 'GPU annotation',
  python_function: 'Python',
}

function kindLabel(kind: string): string {
  return KIND_LABELS[kind] ?? kind.replace(/_/g, ' ')
}

function text(value: unknown): string {
  if (value === null || value === undefined) return '–'
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : String(Math.round(value * 1e6) / 1e6)
  if (typeof value === 'string') return value
  return JSON.stringify(value)
}

function ArgValue({ name, value }: { name: string; value: unknown }) {
  if (typeof value === 'string' && (name === 'call_stack' || name === 'Call stack') && value.includes(';')) {
    return (
      <ol className="trace-stack">
        {value
          .split(';')
          .filter(Boolean)
          .map((frame, i) => (
            <li key={i}>{frame}</li>
          ))}
      </ol>
    )
  }
  return <span className="trace-arg-value">{text(value)}</span>
}

export function DetailsPanel({ state, tracks, traceStart, onJump, onClose, onZoom }: Props) {
  if (state.status === 'none') {
    // Nothing selected: one line, so the timeline keeps the height (the keys are in the status line).
    return (
      <aside className="trace-details empty" data-testid="trace-details" aria-label="Event details">
        Click an event for its details and its flows · <kbd>F</kbd> zooms to it · hatched blocks are events too small to draw one by one (click to zoom in)
      </aside>
    )
  }
  if (state.status === 'pending') {
    return (
      <aside className="trace-details" data-testid="trace-details" data-state="pending" aria-label="Event details">
        <div className="trace-details-head">
          <div className="trace-details-title">{state.name ?? `Event ${state.id}`}</div>
        </div>
        <div className="muted small">Loading details…</div>
      </aside>
    )
  }
  if (state.status === 'error') {
    return (
      <aside className="trace-details" data-testid="trace-details" data-state="error" aria-label="Event details">
        <ErrorBanner error={state.error} what={`event ${state.id}`} />
      </aside>
    )
  }

  const d = state.data
  const track = d.track !== null && d.track !== undefined ? tracks[d.track] : undefined
  const start = d.ts !== null && d.ts !== undefined ? d.ts - traceStart : null
  const fields: [string, ReactNode][] = [
    ['Start', start === null ? '–' : fmtTime(start)],
    ['Timestamp', `${text(d.ts)} us`],
    ['Duration', fmtDuration(d.dur)],
    ['Category', text(d.cat)],
    ['Process', track?.process ?? text(d.pid)],
    ['Thread', track?.thread ?? text(d.tid)],
  ]
  if (d.depth !== null && d.depth !== undefined) fields.push(['Depth', String(d.depth)])
  if (d.external_id !== null && d.external_id !== undefined) fields.push(['External id', text(d.external_id)])
  if (d.correlation !== null && d.correlation !== undefined) fields.push(['Correlation', text(d.correlation)])
  for (const [k, v] of Object.entries(d)) {
    if (KNOWN.has(k) || v === null || v === undefined || typeof v === 'object') continue
    fields.push([k.replace(/_/g, ' '), text(v)])
  }
  fields.push(['Event id', String(d.id)])

  const groups = Object.entries(d.args ?? {}).filter(([, args]) => args && Object.keys(args).length > 0)

  return (
    <aside className="trace-details" data-testid="trace-details" data-state="ok" data-event-id={d.id} aria-label="Event details">
      <div className="trace-details-head">
        <span className={`chip trace-kind kind-${d.kind}`}>{kindLabel(d.kind)}</span>
        <div className="trace-details-title" data-testid="trace-details-name" title={d.name ?? ''}>
          {d.name ?? '(no name)'}
        </div>
        <button type="button" className="link-button" onClick={onZoom} title="Zoom to this event (F)">
          Zoom to event
        </button>
        <button type="button" className="icon-button" onClick={onClose} aria-label="Close the details" title="Close (Esc)">
          <span aria-hidden="true">✕</span>
        </button>
      </div>
      <div className="trace-details-body">
        <section className="trace-details-col">
          <dl className="trace-kv">
            {fields.map(([k, v]) => (
              <div key={k} className="trace-kv-row">
                <dt>{k}</dt>
                <dd>{v}</dd>
              </div>
            ))}
          </dl>
          {d.parent !== null && d.parent !== undefined && (
            <div className="trace-links">
              <span className="trace-links-title">Parent</span>
              <button type="button" className="link-button" onClick={() => onJump({ id: d.parent as number })} data-testid="trace-parent-link">
                event {d.parent}
              </button>
            </div>
          )}
        </section>
        <section className="trace-details-col wide">
          <div className="trace-section-title">Arguments</div>
          {groups.length === 0 ? (
            <div className="muted small">No arguments</div>
          ) : (
            <table className="trace-args" data-testid="trace-args">
              <tbody>
                {groups.map(([group, args]) => [
                  groups.length > 1 ? (
                    <tr key={`${group}-h`} className="trace-args-group">
                      <th colSpan={2}>{ARG_GROUPS[group] ?? group}</th>
                    </tr>
                  ) : null,
                  ...Object.entries(args).map(([k, v]) => (
                    <tr key={`${group}-${k}`}>
                      <th scope="row">{k}</th>
                      <td>
                        <ArgValue name={k} value={v} />
                      </td>
                    </tr>
                  )),
                ])}
              </tbody>
            </table>
          )}
        </section>
        <section className="trace-details-col">
          <div className="trace-section-title">Correlated</div>
          {d.correlated.length === 0 ? (
            <div className="muted small">None</div>
          ) : (
            <ul className="trace-link-list" data-testid="trace-correlated">
              {d.correlated.map((p) => (
                <li key={p.id}>
                  <span className="trace-link-kind">{kindLabel(p.kind)}</span>
                  <button type="button" className="link-button trace-jump" onClick={() => onJump({ id: p.id, partner: p })} title={p.name ?? ''}>
                    {p.name ?? `event ${p.id}`}
                  </button>
                  <span className="trace-link-dur">{fmtDuration(p.dur)}</span>
                </li>
              ))}
            </ul>
          )}
          {d.flows.length > 0 && (
            <>
              <div className="trace-section-title">Flows</div>
              <ul className="trace-link-list" data-testid="trace-flows">
                {d.flows.map((f, i) => (
                  <li key={i}>
                    <span className="trace-link-kind">
                      {f.direction === 'out' ? '→' : '←'} {f.cat}
                    </span>
                    {f.other_id !== null ? (
                      <button type="button" className="link-button trace-jump" onClick={() => onJump({ id: f.other_id as number })}>
                        {f.direction === 'out' ? 'to' : 'from'} event {f.other_id}
                      </button>
                    ) : (
                      <span className="muted">{f.direction === 'out' ? 'to' : 'from'} an event not drawn</span>
                    )}
                    <span className="trace-link-dur">{fmtTime(f.other_ts - traceStart)}</span>
                  </li>
                ))}
              </ul>
            </>
          )}
        </section>
      </div>
    </aside>
  )
}
