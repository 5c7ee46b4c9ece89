// Memory view: per-device allocated/reserved curves with zoom-to-filter, peaks against the
// device capacity, growth (leak) callouts, the alloc/free events and per-operator statistics of
// the zoomed range, the memory-timeline categories when the span has that export, and the run's
// allocator snapshot (SnapshotCard) on the same time axis when it covers the span.
import { useCallback, useEffect, useMemo, useRef, useState, type MouseEvent as ReactMouseEvent, type ReactNode } from 'react'
import { ApiError, type Selection } from '../../api'
import { Chart, type EChartsInstance } from '../../charts/Chart'
import { Async } from '../../components/Async'
import { StatCard } from '../../components/StatCard'
import { useViewStyle } from '../../components/style'
import { Banner, Card, DownloadLink, Empty, ErrorBanner, Field, Loading, Select } from '../../components/ui'
import { bytes, count, msText, pct, signedBytes } from '../../format'
import { useAsync } from '../../hooks'
import type { Theme } from '../../theme'
import type { MemoryState } from './state'
import { fetchMemory, fetchMemoryTimeline, memoryCsvUrl, type Leak, type MemoryPayload, type MemoryTimeline } from './api'
import { CATEGORY_COLORS, categoryLabel, curveOption, timelineOption, type CurvePoints, type MsRange } from './charts'
import css from './memory.css?inline'
import { SnapshotCard } from './SnapshotCard'
import { EventsCard, OperatorsCard } from './tables'

interface Props {
  selection: Selection
  state: MemoryState
  update: (patch: Partial<MemoryState>) => void
  theme: Theme
}

export function MemoryView({ selection, state, update, theme }: Props) {
  useViewStyle('memory', css)
  const device = state.memDevice
  const selKey = `${selection.run}\u0000${selection.worker}\u0000${selection.span}`
  const base = useAsync('memory', `${selKey}\u0000${device}`, (signal) => fetchMemory(selection, { device: device || undefined }, signal))
  const timeline = useAsync('memory/timeline', selKey, (signal) => fetchMemoryTimeline(selection, signal))

  // A device from an old link that this span does not have: fall back to the default device.
  const unknownDevice = base.status === 'error' && base.error instanceof ApiError && base.error.status === 404 && device !== ''
  useEffect(() => {
    if (unknownDevice) update({ memDevice: '' })
  }, [unknownDevice, update])

  if (base.status === 'error') return unknownDevice ? null : <ErrorBanner error={base.error} what="the memory view" />
  if (base.status !== 'ok') return <Loading progress={base.status === 'pending' ? base.progress : null} label="Loading memory" />
  const data = base.data
  const shown = device && data.devices.includes(device) ? device : (data.default_device ?? data.devices[0] ?? '')
  const timelineData = timeline.status === 'ok' ? timeline.data : null

  return (
    <div className="view memory" data-testid="memory-view">
      {data.devices.length > 0 && (
        <div className="toolbar">
          <div className="mem-device">
            <Field label="Device">
              {(id) => (
                <Select
                  id={id}
                  value={shown}
                  onChange={(v) => update({ memDevice: v === data.default_device ? '' : v })}
                  options={data.devices.map((d) => ({ value: d, label: d }))}
                  testId="mem-device"
                />
              )}
            </Field>
          </div>
          <div className="spacer" />
          <DownloadLink href={memoryCsvUrl(selection, { device: shown || undefined })} testId="mem-csv" label="CSV" />
        </div>
      )}
      {data.devices.length === 0 ? (
        <Card title="Memory" testId="mem-empty">
          <Empty title="No memory records in this trace">
            Record with <code className="inline-code">torch.profiler.profile(profile_memory=True, record_shapes=True, with_stack=True)</code> to see
            allocations, frees and per-operator memory.
          </Empty>
        </Card>
      ) : (
        <MemoryContent key={`${selKey}\u0000${shown}`} selection={selection} data={data} device={shown} theme={theme} timeline={timelineData} />
      )}
      {data.devices.length === 0 && timelineData && <TimelineCard timeline={timelineData} origin={null} range={null} theme={theme} />}
      {data.devices.length === 0 && <SnapshotCard source={selection} origin={data.time_origin_us} trace={null} theme={theme} />}
      {timeline.status === 'error' && <ErrorBanner error={timeline.error} what="the memory timeline" />}
    </div>
  )
}

/** A run that holds memory-timeline exports but no trace: the categories on their own clock. */
export function MemoryExportView({ run, theme }: { run: string; theme: Theme }) {
  useViewStyle('memory', css)
  const timeline = useAsync('memory/timeline', `export\u0000${run}`, (signal) => fetchMemoryTimeline({ run }, signal))
  return (
    <Async state={timeline} what="the memory timeline" label="Loading the memory timeline">
      {(data) => (
        <div className="view memory" data-testid="memory-view">
          <Banner kind="info" title="This run holds memory files but no trace" testId="mem-export-only">
            Only what the memory-timeline export or allocator snapshot holds is shown; record the trace too (on_trace_ready) for the curves, events and
            operators.
          </Banner>
          {data && <TimelineCard timeline={data} origin={null} range={null} theme={theme} />}
          <SnapshotCard source={{ run }} origin={null} trace={null} theme={theme} />
        </div>
      )}
    </Async>
  )
}

// ---------------------------------------------------------------------------------------------

function MemoryContent({
  selection,
  data,
  device,
  theme,
  timeline,
}: {
  selection: Selection
  data: MemoryPayload
  device: string
  theme: Theme
  timeline: MemoryTimeline | null
}) {
  const origin = data.time_origin_us ?? 0
  /** The zoomed range in trace us, or null for the whole trace. */
  const [range, setRange] = useState<[number, number] | null>(null)
  const zoomKey = range ? `${selection.run}\u0000${selection.worker}\u0000${selection.span}\u0000${device}\u0000${range[0]}\u0000${range[1]}` : null
  const zoomed = useAsync('memory', zoomKey, (signal) => fetchMemory(selection, { device, start_us: range![0], end_us: range![1] }, signal))
  const rangeData: MemoryPayload | null = !range ? data : zoomed.status === 'ok' ? zoomed.data : zoomed.status === 'pending' ? (zoomed.previous ?? null) : null

  const peak = data.peaks[device] ?? null
  const [showCapacity, setShowCapacity] = useState(false)
  const msRange: MsRange = useMemo(() => (range ? [(range[0] - origin) / 1000, (range[1] - origin) / 1000] : null), [range, origin])

  // The whole-trace curve, with the zoomed request's finer points inside the range.
  const points = useMemo(() => {
    const full = toPoints(data.curves[device], origin)
    const detail = range && zoomed.status === 'ok' ? toPoints(zoomed.data.curves[device], origin) : null
    if (!detail || !msRange) return full
    const before = full.t.findIndex((t) => t >= msRange[0])
    const after = full.t.findIndex((t) => t > msRange[1])
    const cut = (p: CurvePoints, lo: number, hi: number): CurvePoints => ({ t: p.t.slice(lo, hi), allocated: p.allocated.slice(lo, hi), reserved: p.reserved.slice(lo, hi) })
    const head = cut(full, 0, before < 0 ? full.t.length : before)
    const tail = cut(full, after < 0 ? full.t.length : after, full.t.length)
    return {
      t: [...head.t, ...detail.t, ...tail.t],
      allocated: [...head.allocated, ...detail.allocated, ...tail.allocated],
      reserved: [...head.reserved, ...detail.reserved, ...tail.reserved],
    }
  }, [data, device, origin, range, msRange, zoomed])

  const option = useMemo(
    () =>
      curveOption(
        points,
        { peak: peak && peak.t_us !== null ? { t: (peak.t_us - origin) / 1000, bytes: peak.bytes } : null, capacity: peak?.capacity_bytes ?? null, showCapacity },
        msRange,
        theme,
      ),
    [points, peak, origin, showCapacity, msRange, theme],
  )

  // Zoom (slider, brush or wheel) -> debounced re-query of the range; the full window clears it.
  const timer = useRef<number | undefined>(undefined)
  useEffect(() => () => window.clearTimeout(timer.current), [])
  const onZoom = useCallback(
    (_params: unknown, chart: EChartsInstance) => {
      const zoom = ((chart.getOption() as { dataZoom?: { start?: number; end?: number; startValue?: number; endValue?: number }[] }).dataZoom ?? [])[0]
      if (!zoom) return
      window.clearTimeout(timer.current)
      timer.current = window.setTimeout(() => {
        const full = (zoom.start ?? 0) <= 0.001 && (zoom.end ?? 100) >= 99.999
        if (full || zoom.startValue === undefined || zoom.endValue === undefined) {
          setRange(null)
          return
        }
        const lo = Math.round((origin + zoom.startValue * 1000) * 1000) / 1000
        const hi = Math.round((origin + zoom.endValue * 1000) * 1000) / 1000
        setRange((prev) => (prev && prev[0] === lo && prev[1] === hi ? prev : [lo, hi]))
      }, 250)
    },
    [origin],
  )
  const onEvents = useMemo(() => ({ datazoom: onZoom }), [onZoom])
  const onBrush = useCallback((lo: number, hi: number) => setRange([Math.round((origin + lo * 1000) * 1000) / 1000, Math.round((origin + hi * 1000) * 1000) / 1000]), [origin])

  const selectionPeak = useMemo(() => {
    if (!range || zoomed.status !== 'ok') return null
    let max: number | null = null
    for (const v of zoomed.data.curves[device]?.allocated ?? []) if (v !== null && (max === null || v > max)) max = v
    return max
  }, [range, zoomed, device])

  const traceCurve = useMemo(() => ({ device, points }), [device, points])
  const leaks = data.leaks.filter((l) => !l.device || l.device === device)
  const curve = data.curves[device]

  return (
    <>
      <div className="mem-stats" data-testid="mem-stats">
        <StatCard
          className="mem-stat"
          label="Peak allocated"
          value={bytes(peak?.bytes)}
          sub={peak ? `${count(peak.bytes)} bytes${peak.t_us != null ? ` · at ${msText(peak.t_us - origin)} ms` : ''}` : undefined}
          testId="mem-peak"
        />
        <StatCard
          className="mem-stat"
          label="Peak reserved"
          value={peak?.reserved_bytes != null ? bytes(peak.reserved_bytes) : 'none'}
          sub={peak?.reserved_bytes != null ? `${count(peak.reserved_bytes)} bytes` : device === 'CPU' ? 'no reserved pool on the CPU' : 'not recorded in the trace'}
          testId="mem-peak-reserved"
        />
        <StatCard
          className="mem-stat"
          label="Device capacity"
          value={peak?.capacity_bytes ? bytes(peak.capacity_bytes) : 'unknown'}
          sub={peak?.capacity_bytes ? `peak = ${pct((peak.fraction_of_capacity ?? 0) * 100)} of it` : 'not in the trace’s device properties'}
          testId="mem-capacity"
        />
        <StatCard
          className="mem-stat"
          label="Still allocated at the end"
          value={bytes(peak?.end_bytes)}
          sub="all live memory then; not a leak by itself"
          testId="mem-end"
        />
      </div>

      {leaks.map((leak, i) => (
        <LeakCallout key={i} leak={leak} />
      ))}

      <Card
        title="Memory usage"
        subtitle={
          <>
            {device}
            {curve?.approximate ? ' · rebuilt from allocation sizes (the trace has no totals), starts at 0' : ''} · drag on the chart or the slider to zoom; the
            tables below follow the zoomed range
          </>
        }
        actions={
          <div className="mem-chart-actions">
            {peak?.capacity_bytes ? (
              <label className="mem-check" title="Scale the y axis to the device's total memory">
                <input type="checkbox" checked={showCapacity} onChange={(e) => setShowCapacity(e.target.checked)} data-testid="mem-show-capacity" />
                Show capacity
              </label>
            ) : null}
            {range && (
              <span className="mem-range" data-testid="mem-range">
                {msText(range[0] - origin)} – {msText(range[1] - origin)} ms
                {selectionPeak !== null && <span className="muted"> · peak {bytes(selectionPeak)}</span>}
              </span>
            )}
            <button type="button" className="button" onClick={() => setRange(null)} disabled={!range} data-testid="mem-reset">
              Reset zoom
            </button>
          </div>
        }
        testId="mem-curve-card"
      >
        {points.t.length === 0 ? (
          <Empty title="No curve">This device has no memory totals to plot.</Empty>
        ) : (
          <BrushZoom onRange={onBrush}>
            {(onOption) => <Chart option={option} height={340} label={`Memory usage of ${device}`} testId="mem-curve" onEvents={onEvents} onOption={onOption} />}
          </BrushZoom>
        )}
      </Card>

      {timeline && <TimelineCard timeline={timeline} origin={origin} range={msRange} theme={theme} />}

      <SnapshotCard source={selection} origin={origin} trace={traceCurve} theme={theme} />

      {range && zoomed.status === 'error' && <ErrorBanner error={zoomed.error} what="the zoomed range" />}
      <div className="mem-tables">
        <EventsCard data={rangeData} device={device} origin={origin} pending={Boolean(range) && zoomed.status === 'pending'} />
        <OperatorsCard data={rangeData} device={device} pending={Boolean(range) && zoomed.status === 'pending'} />
      </div>
      {data.messages.length > 0 && (
        <ul className="notes" data-testid="mem-messages">
          {data.messages.map((m, i) => (
            <li key={i}>{m}</li>
          ))}
        </ul>
      )}
    </>
  )
}

/**
 * Drag across the plot to zoom to that time range: the chart reports its instance through
 * `onOption`, pixels become axis values with convertFromPixel, and a band shows the selection.
 */
const PLOT_TOP = 40 // grid.top of curveOption

interface Drag {
  x0: number
  x1: number
  top: number
  height: number
}

function BrushZoom({ onRange, children }: { onRange: (lo: number, hi: number) => void; children: (onOption: (chart: EChartsInstance) => void) => ReactNode }) {
  const chartRef = useRef<EChartsInstance | null>(null)
  const boxRef = useRef<HTMLDivElement>(null)
  const [drag, setDrag] = useState<Drag | null>(null)
  const stopRef = useRef<(() => void) | null>(null)
  useEffect(() => () => stopRef.current?.(), [])
  const onOption = useCallback((chart: EChartsInstance) => {
    chartRef.current = chart
  }, [])

  // Window listeners in the capture phase: the chart's own handlers stop mousemove while a
  // button is down, so listeners on the element would miss the drag.
  const onDown = (event: ReactMouseEvent<HTMLDivElement>) => {
    const chart = chartRef.current
    const box = boxRef.current
    if (!chart || !box || event.button !== 0) return
    const left = box.getBoundingClientRect().left
    const top = box.getBoundingClientRect().top
    const x0 = event.clientX - left
    if (!chart.containPixel({ gridIndex: 0 }, [x0, event.clientY - top])) return
    event.preventDefault()
    // the plot's vertical extent: from the top margin to the y = 0 line (sizes are never negative)
    const bottom = chart.convertToPixel({ yAxisIndex: 0 }, 0) as number
    let current: Drag = { x0, x1: x0, top: PLOT_TOP, height: Math.max(0, bottom - PLOT_TOP) }
    setDrag(current)
    const move = (e: MouseEvent) => {
      current = { ...current, x1: Math.min(Math.max(e.clientX - left, 0), box.clientWidth) }
      setDrag(current)
    }
    const up = () => {
      stop()
      if (Math.abs(current.x1 - current.x0) <= 4) return
      const a = chart.convertFromPixel({ xAxisIndex: 0 }, Math.min(current.x0, current.x1)) as number
      const b = chart.convertFromPixel({ xAxisIndex: 0 }, Math.max(current.x0, current.x1)) as number
      if (Number.isFinite(a) && Number.isFinite(b) && b > a) onRange(a, b)
    }
    const stop = () => {
      window.removeEventListener('mousemove', move, true)
      window.removeEventListener('mouseup', up, true)
      stopRef.current = null
      setDrag(null)
    }
    stopRef.current?.()
    stopRef.current = stop
    window.addEventListener('mousemove', move, true)
    window.addEventListener('mouseup', up, true)
  }

  return (
    <div className="mem-brush" ref={boxRef} onMouseDown={onDown} data-testid="mem-brush">
      {children(onOption)}
      {drag && <div className="mem-brush-band" style={{ left: Math.min(drag.x0, drag.x1), width: Math.abs(drag.x1 - drag.x0), top: drag.top, height: drag.height }} />}
    </div>
  )
}

function toPoints(curve: MemoryPayload['curves'][string] | undefined, origin: number): CurvePoints {
  const t: number[] = []
  const allocated: number[] = []
  const reserved: (number | null)[] = []
  if (!curve) return { t, allocated, reserved }
  for (let i = 0; i < curve.t_us.length; i++) {
    const x = curve.t_us[i]
    const y = curve.allocated[i]
    if (x === null || y === null) continue
    t.push((x - origin) / 1000)
    allocated.push(y)
    reserved.push(curve.reserved[i] ?? null)
  }
  return { t, allocated, reserved }
}

// ---------------------------------------------------------------------------------------------

function LeakCallout({ leak }: { leak: Leak }) {
  // /memory's flags name a device and the operators allocating what stays; /memory/timeline's
  // are on the export's total.
  const device = 'device' in leak ? leak.device : ''
  const approximate = 'approximate' in leak && leak.approximate
  const topOps = 'top_ops' in leak ? leak.top_ops : []
  return (
    <Banner kind="warning" title={`Possible leak: allocated memory grew at the end of every one of ${leak.steps.length} steps`} testId="mem-leak">
      <div>
        +{bytes(leak.growth_bytes)} in all, about {signedBytes(leak.per_step_bytes)} per step{device ? ` on ${device}` : ''}; every rise was above the
        noise ({bytes(leak.noise_bytes)}){approximate ? ' (approximate: rebuilt from allocation sizes)' : ''}.
      </div>
      <div className="leak-steps">
        {leak.steps.map((s, i) => (
          <span key={i} className="leak-step">
            step {s}: {bytes(leak.allocated_at_step_end[i])}
          </span>
        ))}
      </div>
      {topOps.length > 0 && (
        <div data-testid="mem-leak-ops">
          Still allocated at the end, allocated after the first step by:{' '}
          <span className="leak-ops">{topOps.map((o) => `${o.name}: ${bytes(o.bytes)} in ${count(o.count)}`).join(', ')}</span>
        </div>
      )}
    </Banner>
  )
}

// ---------------------------------------------------------------------------------------------

function TimelineCard({ timeline, origin, range, theme }: { timeline: MemoryTimeline; origin: number | null; range: MsRange; theme: Theme }) {
  // On the trace clock when the export could be aligned (baseTimeNanoseconds), else from its start.
  const aligned = origin !== null && Boolean(timeline.base_time_ns)
  const zero = aligned ? origin : (timeline.t_us[0] ?? 0)
  const series = useMemo(
    () => timeline.categories.map((name) => ({ name, values: timeline.series[name] ?? [] })).filter((s) => s.values.some((v) => v !== 0)),
    [timeline],
  )
  const option = useMemo(
    () => timelineOption(timeline.t_us.map((t) => (t - zero) / 1000), series, aligned ? range : null, theme),
    [timeline, zero, series, aligned, range, theme],
  )
  const atPeak = useMemo(() => {
    if (!timeline.total.length) return null
    let at = 0
    timeline.total.forEach((v, i) => {
      if (v > timeline.total[at]) at = i
    })
    const parts = series.map((s) => ({ name: s.name, bytes: s.values[at] ?? 0 })).filter((p) => p.bytes > 0)
    return { t: timeline.t_us[at] - zero, parts: parts.sort((a, b) => b.bytes - a.bytes) }
  }, [timeline, series, zero])
  const growth = timeline.leaks
  return (
    <Card
      title="Memory by category"
      subtitle={
        <>
          From the memory-timeline export ({count(timeline.records)} records{timeline.skipped ? `, ${count(timeline.skipped)} skipped` : ''}) · peak{' '}
          <span data-testid="mem-timeline-peak">{bytes(timeline.peak?.bytes)}</span>
          {aligned ? '' : ' · time since the first record'}
        </>
      }
      testId="mem-timeline-card"
    >
      {series.length === 0 ? (
        <Empty title="Empty timeline">The export holds no memory changes.</Empty>
      ) : (
        <>
          <Chart option={option} height={300} label="Memory by category" testId="mem-timeline" />
          {atPeak && (
            <div className="mem-categories" data-testid="mem-timeline-categories">
              <span className="muted">At the peak ({msText(atPeak.t)} ms):</span>
              {atPeak.parts.map((p) => (
                <span key={p.name} className="mem-category" data-category={p.name}>
                  <span className="swatch" style={{ background: CATEGORY_COLORS[p.name] }} />
                  {categoryLabel(p.name)} <b>{bytes(p.bytes)}</b>
                </span>
              ))}
            </div>
          )}
        </>
      )}
      {growth.map((leak, i) => (
        <LeakCallout key={i} leak={leak} />
      ))}
      {timeline.messages.length > 0 && (
        <ul className="notes">
          {timeline.messages.map((m, i) => (
            <li key={i}>{m}</li>
          ))}
        </ul>
      )}
    </Card>
  )
}
