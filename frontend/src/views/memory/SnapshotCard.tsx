// The allocator-snapshot section of the Memory view: allocated/reserved over the snapshot's
// entries (level of detail: zooming re-queries the range), on the trace's time axis with the
// trace's own curve and steps when the snapshot covers the span; the segments and their live
// blocks at a clicked instant (fragmentation); the largest allocations live at the peak with
// their allocation stacks. A refused pickle shows the server's reason.
import { useCallback, useEffect, useMemo, useRef, useState } from 'react'
import { ApiError, type Selection } from '../../api'
import { Chart, type EChartsInstance } from '../../charts/Chart'
import { Card, DownloadLink, ErrorBanner, Field, Loading, Select } from '../../components/ui'
import { bytes, count, pct } from '../../format'
import { useAsync } from '../../hooks'
import type { Theme } from '../../theme'
import { fetchSnapshot, snapshotCsvUrl, type MemorySnapshot, type SnapshotAllocation, type SnapshotQuery, type SnapshotSegment } from './api'
import type { CurvePoints, MsRange } from './charts'
import { snapshotOption } from './snapshotCharts'

interface Props {
  /** The span (its clock, its paired snapshot) or just the run (a run with no trace). */
  source: Selection | { run: string }
  /** The trace's time origin, us: x = (t - origin) / 1000 ms, as the trace's memory curve. */
  origin: number | null
  /** The trace's allocated curve (ms since origin) of the device shown above, if any. */
  trace: { device: string; points: CurvePoints } | null
  theme: Theme
}

/** x axis units <-> the payload's clock. */
interface Axis {
  toX: (t: number) => number
  fromX: (x: number) => number
  byEntry: boolean
}

function axisOf(data: MemorySnapshot, origin: number | null): Axis {
  if (data.clock === 'entry') return { toX: (t) => t, fromX: (x) => x, byEntry: true }
  const zero = data.clock === 'trace' && origin !== null ? origin : (data.extent[0] ?? 0)
  return { toX: (t) => (t - zero) / 1000, fromX: (x) => Math.round((zero + x * 1000) * 1000) / 1000, byEntry: false }
}

export function SnapshotCard({ source, origin, trace, theme }: Props) {
  const [query, setQuery] = useState<SnapshotQuery>({})
  const sourceKey = JSON.stringify(source)
  useEffect(() => setQuery({}), [sourceKey])
  const key = `${sourceKey}\u0000${JSON.stringify(query)}`
  const state = useAsync('memory/snapshot', key, (signal) => fetchSnapshot(source, query, signal))
  const names = useRef<string[]>([])
  const data = state.status === 'ok' ? state.data : state.status === 'pending' ? (state.previous ?? null) : null
  if (data) names.current = data.snapshots

  if (state.status === 'ok' && state.data === null) return null // the run holds no snapshot
  if (state.status === 'error') {
    const refused = state.error instanceof ApiError && state.error.status === 422
    return (
      <Card title="Allocator snapshot" testId="mem-snapshot-card">
        <SnapshotPicker names={names.current} value={query.snapshot ?? ''} onChange={(snapshot) => setQuery({ snapshot })} />
        <ErrorBanner error={state.error} what={refused ? 'the allocator snapshot (refused)' : 'the allocator snapshot'} />
      </Card>
    )
  }
  if (!data) return <Loading progress={state.status === 'pending' ? state.progress : null} label="Loading the allocator snapshot" />
  return <SnapshotContent data={data} query={query} setQuery={setQuery} source={source} origin={origin} trace={trace} theme={theme} pending={state.status === 'pending'} />
}

function SnapshotPicker({ names, value, onChange }: { names: string[]; value: string; onChange: (name: string) => void }) {
  if (names.length < 2) return null
  return (
    <div className="mem-snapshot-pick">
      <Field label="Snapshot">
        {(id) => <Select id={id} value={value || names[0]} onChange={onChange} options={names.map((n) => ({ value: n, label: n }))} testId="mem-snapshot-select" />}
      </Field>
    </div>
  )
}

function SnapshotContent({
  data,
  query,
  setQuery,
  source,
  origin,
  trace,
  theme,
  pending,
}: {
  data: MemorySnapshot
  query: SnapshotQuery
  setQuery: (update: (q: SnapshotQuery) => SnapshotQuery) => void
  source: Selection | { run: string }
  origin: number | null
  trace: Props['trace']
  theme: Theme
  pending: boolean
}) {
  const axis = useMemo(() => axisOf(data, origin), [data, origin])
  const points = useMemo(() => ({ t: data.curve.t.map(axis.toX), allocated: data.curve.allocated, reserved: data.curve.reserved }), [data, axis])
  const range: MsRange = useMemo(
    () => (query.start !== undefined && query.end !== undefined ? [axis.toX(query.start), axis.toX(query.end)] : null),
    [query.start, query.end, axis],
  )
  const overlay = useMemo(
    () => (data.clock === 'trace' && trace && trace.device === data.device && trace.points.t.length ? { label: `Trace allocated (${trace.device})`, points: trace.points } : null),
    [data, trace],
  )
  const marks = useMemo(
    () => ({
      peak: data.peak.t !== null ? ([axis.toX(data.peak.t), data.peak.bytes] as [number, number]) : null,
      at: data.segments.at !== null ? axis.toX(data.segments.at) : null,
      ooms: data.ooms.filter((o) => o.t !== null).map((o) => axis.toX(o.t as number)),
      steps: data.steps.filter((s) => s.start !== null && s.end !== null).map((s) => ({ name: s.name, start: axis.toX(s.start as number), end: axis.toX(s.end as number) })),
    }),
    [data, axis],
  )
  const option = useMemo(() => snapshotOption(points, overlay, marks, range, theme, axis.byEntry), [points, overlay, marks, range, theme, axis])

  // zoom -> debounced re-query of the range (level of detail); click -> the segments there
  const timer = useRef<number | undefined>(undefined)
  useEffect(() => () => window.clearTimeout(timer.current), [])
  const onZoom = useCallback(
    (_params: unknown, chart: EChartsInstance) => {
      const zoom = ((chart.getOption() as { dataZoom?: { start?: number; end?: number; startValue?: number; endValue?: number }[] }).dataZoom ?? [])[0]
      if (!zoom) return
      window.clearTimeout(timer.current)
      timer.current = window.setTimeout(() => {
        const full = (zoom.start ?? 0) <= 0.001 && (zoom.end ?? 100) >= 99.999
        const lo = zoom.startValue
        const hi = zoom.endValue
        setQuery((q) => (full || lo === undefined || hi === undefined ? { ...q, start: undefined, end: undefined } : { ...q, start: axis.fromX(lo), end: axis.fromX(hi) }))
      }, 250)
    },
    [axis, setQuery],
  )
  const onEvents = useMemo(() => ({ datazoom: onZoom }), [onZoom])
  const onOption = useCallback(
    (chart: EChartsInstance) => {
      const zr = chart.getZr()
      zr.off('click')
      zr.on('click', (event: { offsetX: number; offsetY: number }) => {
        if (!chart.containPixel({ gridIndex: 0 }, [event.offsetX, event.offsetY])) return
        const x = chart.convertFromPixel({ xAxisIndex: 0 }, event.offsetX) as number
        if (Number.isFinite(x)) setQuery((q) => ({ ...q, at: axis.fromX(x) }))
      })
    },
    [axis, setQuery],
  )

  const clockText =
    data.clock === 'trace' ? 'on this trace’s time axis' : data.clock === 'snapshot' ? 'on its own clock (it does not cover this trace)' : 'over its entries (no times recorded)'
  return (
    <Card
      title="Allocator snapshot"
      subtitle={
        <span data-testid="mem-snapshot-subtitle">
          {data.name} · {data.device ?? 'no device'} · {count(data.entries)} allocator entries · {clockText} · click the chart to see the segments at that instant
        </span>
      }
      actions={
        <div className="mem-chart-actions">
          {pending && <span className="muted">Loading…</span>}
          <button type="button" className="button" onClick={() => setQuery((q) => ({ snapshot: q.snapshot, device: q.device }))} disabled={!range && query.at === undefined} data-testid="mem-snapshot-reset">
            Reset
          </button>
          <DownloadLink href={snapshotCsvUrl(source, { snapshot: query.snapshot, device: query.device })} testId="mem-snapshot-csv" label="CSV" />
        </div>
      }
      testId="mem-snapshot-card"
    >
      <div className="mem-snapshot-toolbar">
        <SnapshotPicker names={data.snapshots} value={query.snapshot ?? data.name} onChange={(snapshot) => setQuery(() => ({ snapshot }))} />
        {data.devices.length > 1 && (
          <Field label="Device">
            {(id) => (
              <Select id={id} value={data.device ?? ''} onChange={(device) => setQuery((q) => ({ snapshot: q.snapshot, device }))} options={data.devices.map((d) => ({ value: d, label: d }))} testId="mem-snapshot-device" />
            )}
          </Field>
        )}
        <span className="mem-snapshot-peak" data-testid="mem-snapshot-peak">
          Peak allocated <b>{bytes(data.peak.bytes)}</b> · peak reserved <b>{bytes(data.peak.reserved_bytes)}</b>
          {data.ooms.length > 0 && <span className="mem-oom"> · {count(data.ooms.length)} out-of-memory event{data.ooms.length === 1 ? '' : 's'}</span>}
        </span>
      </div>
      <Chart option={option} height={320} label={`Allocator snapshot ${data.name}`} testId="mem-snapshot-chart" onEvents={onEvents} onOption={onOption} />
      <Segments data={data} at={marks.at} byEntry={axis.byEntry} />
      <TopAllocations rows={data.top_allocations} toX={axis.toX} byEntry={axis.byEntry} />
      {data.messages.length > 0 && (
        <ul className="notes" data-testid="mem-snapshot-messages">
          {data.messages.map((m, i) => (
            <li key={i}>{m}</li>
          ))}
        </ul>
      )}
    </Card>
  )
}

function xText(x: number | null, byEntry: boolean): string {
  if (x === null) return 'before the first entry'
  return byEntry ? `entry #${Math.round(x)}` : `${(Math.round(x * 1000) / 1000).toLocaleString('en-US')} ms`
}

function Segments({ data, at, byEntry }: { data: MemorySnapshot; at: number | null; byEntry: boolean }) {
  const s = data.segments
  const largest = Math.max(1, ...s.rows.map((r) => r.size))
  const stranded = s.free_bytes > 0 ? 1 - s.largest_free_bytes / s.free_bytes : 0
  return (
    <div className="mem-segments" data-testid="mem-segments">
      <div className="mem-segments-head">
        <b>Segments at {xText(at, byEntry)}</b>
        {at === data.peak.t && ' (the peak)'}: {count(s.segment_count)} segments, {bytes(s.reserved_bytes)} reserved, {bytes(s.allocated_bytes)} in {count(s.block_count)} live blocks,{' '}
        {bytes(s.free_bytes)} free; the largest free run is {bytes(s.largest_free_bytes)}
        {s.free_bytes > 0 && <> ({pct(stranded * 100)} of the free memory is in smaller pieces: fragmentation)</>}
        {s.truncated && <span className="muted"> · the largest segments and blocks are shown</span>}
      </div>
      <div className="mem-segment-list">
        {s.rows.map((row) => (
          <SegmentRow key={row.address} row={row} width={row.size / largest} />
        ))}
      </div>
    </div>
  )
}

function SegmentRow({ row, width }: { row: SnapshotSegment; width: number }) {
  return (
    <div className="mem-segment" data-testid="mem-segment">
      <span className="mem-segment-label" title={`0x${row.address.toString(16)}`}>
        {bytes(row.size)} · {pct((row.allocated_bytes / Math.max(1, row.size)) * 100)} used
      </span>
      <div className="mem-segment-bar" style={{ width: `${Math.max(2, width * 100)}%` }}>
        {row.blocks.map((b) => (
          <span
            key={b.offset}
            className="mem-block"
            style={{ left: `${(b.offset / row.size) * 100}%`, width: `${Math.max(0.3, (b.size / row.size) * 100)}%` }}
            title={`${bytes(b.size)} at +${bytes(b.offset)}${b.frame ? ` · ${b.frame}` : ''}`}
          />
        ))}
      </div>
    </div>
  )
}

function TopAllocations({ rows, toX, byEntry }: { rows: SnapshotAllocation[]; toX: (t: number) => number; byEntry: boolean }) {
  const [open, setOpen] = useState<number | null>(null)
  if (!rows.length) return null
  return (
    <div className="mem-top" data-testid="mem-top-allocations">
      <b>Largest allocations live at the peak</b>
      <table className="mem-top-table">
        <thead>
          <tr>
            <th>Size</th>
            <th>Allocated</th>
            <th>Freed</th>
            <th>Where (first frame outside torch)</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r, i) => (
            <AllocationRow key={i} row={r} open={open === i} onToggle={() => setOpen(open === i ? null : i)} toX={toX} byEntry={byEntry} />
          ))}
        </tbody>
      </table>
    </div>
  )
}

const INTERNAL = ['/torch/', '\\torch\\', '<frozen', '??', 'CUDACachingAllocator']

function AllocationRow({ row, open, onToggle, toX, byEntry }: { row: SnapshotAllocation; open: boolean; onToggle: () => void; toX: (t: number) => number; byEntry: boolean }) {
  const user = row.frames.find((f) => !INTERNAL.some((k) => f.filename.includes(k))) ?? row.frames[0]
  return (
    <>
      <tr className="mem-top-row" onClick={onToggle} data-testid="mem-top-row" aria-expanded={open}>
        <td className="num">{bytes(row.size)}</td>
        <td>{row.alloc_t === null ? 'before the trace' : xText(toX(row.alloc_t), byEntry)}</td>
        <td>{row.free_t === null ? 'still allocated at the dump' : xText(toX(row.free_t), byEntry)}</td>
        <td className="mono">{user ? `${user.name} (${user.filename.split('/').pop()}:${user.line})` : 'no stack recorded'}</td>
      </tr>
      {open && (
        <tr>
          <td colSpan={4}>
            <ol className="mem-stack" data-testid="mem-stack">
              {row.frames.map((f, i) => (
                <li key={i} className="mono">
                  {f.name} <span className="muted">{f.filename}:{f.line}</span>
                </li>
              ))}
              {row.frames.length === 0 && <li className="muted">The snapshot has no stack for this allocation (record with context="all").</li>}
            </ol>
          </td>
        </tr>
      )}
    </>
  )
}
