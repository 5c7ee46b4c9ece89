// Diff view: baseline (the selected run/worker/span) against an experiment, node by node of the
// aligned operator trees. A chart of the children's baseline/experiment time with the
// accumulated delta; click a bar (or a row) to drill down, breadcrumb and Back to go up; the
// operator deltas of the node, sorted by |delta|, with column groups to show.
import { useCallback, useEffect, useMemo, useRef, useState } from 'react'
import { ApiError, type Selection } from '../../api'
import { Chart } from '../../charts/Chart'
import type { EChartsCoreOption } from '../../charts/echarts'
import { FONT, chartColors, escapeHtml, tooltipBase } from '../../charts/options'
import { DataTable, type Column, type SortState } from '../../components/DataTable'
import { Banner, Card, DownloadLink, Empty, ErrorBanner, Loading, SearchBox, Segmented } from '../../components/ui'
import { count, deltaPct, deltaPctValue, duration, signedDuration } from '../../format'
import { useAsync, useDebounced } from '../../hooks'
import type { Theme } from '../../theme'
import type { SelectionState } from '../../urlState'
import type { DiffState } from './state'
import { StatCard } from '../../components/StatCard'
import { useViewStyle } from '../../components/style'
import { diffCsvUrl, fetchDiff, type Basis, type DiffChild, type DiffPayload, type DiffSide, type Experiment, type OperatorDelta } from './api'
import { KernelDeltas } from './KernelDeltas'
import { IntervalCell, VerdictHeader, withinNoise } from './Verdict'
import css from './diff.css?inline'

interface Props {
  selection: Selection
  state: DiffState & SelectionState
  update: (patch: Partial<DiffState & SelectionState>) => void
  theme: Theme
}

const BASE_COLOR = '#1976d2'
const EXP_COLOR = '#f57c00'
const DELTA_COLOR = '#8e24aa'

export function DiffView({ selection, state, update, theme }: Props) {
  useViewStyle('diff', css)
  const exp: Experiment | null = state.expRun && state.expWorker && state.expSpan ? { exp_run: state.expRun, exp_worker: state.expWorker, exp_span: state.expSpan } : null
  const path = state.diffPath || '0'
  const pairKey = exp ? [selection.run, selection.worker, selection.span, exp.exp_run, exp.exp_worker, exp.exp_span].join('\u0000') : null

  // A drill-down path belongs to one pair of traces: start at the top when the pair changes.
  const lastPair = useRef(pairKey)
  useEffect(() => {
    if (lastPair.current !== null && pairKey !== null && lastPair.current !== pairKey) update({ diffPath: '' })
    if (pairKey !== null) lastPair.current = pairKey
  }, [pairKey, update])

  const basis: Basis = state.diffBasis
  const diff = useAsync('diff', pairKey ? `${pairKey}\u0000${path}\u0000${basis}` : null, (signal) => fetchDiff(selection, exp!, path, basis, signal))
  const unknownPath = diff.status === 'error' && diff.error instanceof ApiError && diff.error.status === 404 && path !== '0'
  useEffect(() => {
    if (unknownPath) update({ diffPath: '' })
  }, [unknownPath, update])

  // Names of the nodes drilled through, for the breadcrumb (a reloaded deep link shows numbers).
  const names = useRef(new Map<string, string>())
  const go = useCallback(
    (child: DiffChild | null, to?: string) => {
      if (child) names.current.set(child.path, childLabel(child))
      const target = child?.path ?? to ?? '0'
      update({ diffPath: target === '0' ? '' : target })
    },
    [update],
  )

  if (!exp) return <Loading label="Choose an experiment run on the left" />
  const header = (
    <div className="diff-pair" data-testid="diff-pair">
      <span className="diff-side base">
        <span className="diff-dot" style={{ background: BASE_COLOR }} />
        Baseline <b>{selection.run}</b> · {selection.worker} · span {selection.span}
      </span>
      <span className="diff-vs">vs</span>
      <span className="diff-side exp">
        <span className="diff-dot" style={{ background: EXP_COLOR }} />
        Experiment <b>{exp.exp_run}</b> · {exp.exp_worker} · span {exp.exp_span}
      </span>
    </div>
  )
  if (diff.status === 'error')
    return (
      <div className="view diff" data-testid="diff-view">
        {header}
        {unknownPath ? null : <ErrorBanner error={diff.error} what="the diff" />}
      </div>
    )
  const data = diff.status === 'ok' ? diff.data : diff.status === 'pending' ? (diff.previous ?? null) : null
  if (!data) return <Loading progress={diff.status === 'pending' ? diff.progress : null} label="Aligning the two traces" />
  return (
    <div className="view diff" data-testid="diff-view">
      {header}
      <DiffContent data={data} path={path} names={names.current} go={go} theme={theme} pending={diff.status === 'pending'} csvUrl={diffCsvUrl(selection, exp, path, basis)} state={state} update={update} />
      {state.diffTable === 'kernels' && <KernelDeltas selection={selection} exp={exp} basis={basis} update={update} />}
    </div>
  )
}

// ---------------------------------------------------------------------------------------------

function shortName(name: string): string {
  return name.replace(/^nn\.Module: /, '').replace(/^autograd::engine::evaluate_function: /, 'backward: ')
}

function childLabel(child: DiffChild): string {
  const { left, right } = child
  if (left.type === 'blank') return `${shortName(right.type === 'composite' ? `${right.count} nodes` : right.name)} (experiment only)`
  if (right.type === 'blank') return `${shortName(left.type === 'composite' ? `${left.count} nodes` : left.name)} (baseline only)`
  if (left.type === 'composite' || right.type === 'composite') return `Unmatched: ${count(left.count)} vs ${count(right.count)} nodes`
  return left.name === right.name ? shortName(left.name) : `${shortName(left.name)} / ${shortName(right.name)}`
}

const KIND_WORDS: Record<string, string> = {
  root: 'the whole span',
  operator: 'operator',
  profiler_step: 'profiler step',
  dataloader: 'data loading',
  optimizer: 'optimizer step',
  module: 'module',
  user_annotation: 'annotation',
  python: 'Python function',
  pl_module: 'Lightning module',
  backward: 'backward pass',
  thread: 'another thread',
}

/** One side of a node in words: "nothing", "3 unmatched nodes", "module", "the whole span". */
function sideLabel(side: DiffSide): string {
  if (side.type === 'blank') return 'nothing'
  if (side.type === 'composite') return `${count(side.count)} unmatched nodes`
  return KIND_WORDS[side.type] ?? side.type.replace(/_/g, ' ')
}

export type TimeKey = 'host_duration_us' | 'device_duration_us'

/** The time the page shows: the user's choice, else device time when either side ran any. */
export function timeKey(data: DiffPayload, choice: DiffState['diffTime']): TimeKey {
  if (choice === 'host') return 'host_duration_us'
  if (choice === 'device') return 'device_duration_us'
  return data.left.device_duration_us > 0 || data.right.device_duration_us > 0 ? 'device_duration_us' : 'host_duration_us'
}

function deltaClass(value: number): string {
  return value > 0 ? 'delta-up' : value < 0 ? 'delta-down' : ''
}

function DiffContent({
  data,
  path,
  names,
  go,
  theme,
  pending,
  csvUrl,
  state,
  update,
}: {
  data: DiffPayload
  path: string
  names: Map<string, string>
  go: (child: DiffChild | null, to?: string) => void
  theme: Theme
  pending: boolean
  csvUrl: string
  state: DiffState
  update: (patch: Partial<DiffState>) => void
}) {
  const key = timeKey(data, state.diffTime)
  const timeWord = key === 'device_duration_us' ? 'device' : 'host'
  const basisWords = data.basis === 'per_step' ? `per step (each side divided by its own steps: ${count(data.base.steps)} vs ${count(data.exp.steps)})` : `over the whole span (${count(data.base.steps)} vs ${count(data.exp.steps)} steps)`
  const segments = path.split('-')
  const crumbs = segments.map((_, i) => {
    const p = segments.slice(0, i + 1).join('-')
    return { path: p, label: i === 0 ? 'Whole span' : (names.get(p) ?? `#${segments[i]}`) }
  })
  const current = path === '0' ? 'Whole span' : (names.get(path) ?? (data.left.type === 'blank' ? data.right.name : shortName(data.left.name)))
  crumbs[crumbs.length - 1].label = current
  const parent = segments.length > 1 ? segments.slice(0, -1).join('-') : null

  const option = useMemo(() => childrenOption(data.children, theme, key), [data, theme, key])
  const onEvents = useMemo(
    () => ({
      click: (params: unknown) => {
        const index = (params as { dataIndex?: number }).dataIndex
        const child = index !== undefined ? data.children[index] : undefined
        if (child?.expandable) go(child)
      },
    }),
    [data, go],
  )

  const total = data.delta[key]
  return (
    <>
      <Card
        title={
          <span className="diff-title">
            {parent !== null && (
              <button type="button" className="button diff-back" onClick={() => go(null, parent)} data-testid="diff-back" title="Up one level">
                ← Back
              </button>
            )}
            <nav className="diff-crumbs" aria-label="Drill-down path" data-testid="diff-crumbs">
              {crumbs.map((c, i) => (
                <span key={c.path} className="diff-crumb">
                  {i > 0 && <span className="diff-sep">›</span>}
                  {i < crumbs.length - 1 ? (
                    <button type="button" className="link-button" onClick={() => go(null, c.path)}>
                      {c.label}
                    </button>
                  ) : (
                    <span className="diff-current" data-testid="diff-current">
                      {c.label}
                    </span>
                  )}
                </span>
              ))}
            </nav>
          </span>
        }
        subtitle={
          <span data-testid="diff-basis-words">
            {path === '0' ? 'Every thread of both traces' : `${sideLabel(data.left)} vs ${sideLabel(data.right)}`} · {timeWord} time {basisWords}
            {path === '0' ? ' · the sum of the children below' : ''}
          </span>
        }
        testId="diff-summary"
        actions={
          <span className="diff-controls">
            <Segmented value={state.diffBasis} onChange={(v) => update({ diffBasis: v })} label="Basis" testId="diff-basis" options={[{ value: 'per_step', label: 'Per step' }, { value: 'total', label: 'Whole span' }]} />
            <Segmented
              value={key === 'device_duration_us' ? 'device' : 'host'}
              onChange={(v) => update({ diffTime: v })}
              label="Time"
              testId="diff-time"
              options={[{ value: 'device', label: 'Device time' }, { value: 'host', label: 'Host time' }]}
            />
          </span>
        }
      >
        <VerdictHeader verdict={data.verdict} />
        <div className="diff-stats">
          <StatCard className="diff-stat" label={<SideLabel color={BASE_COLOR} text="Baseline" />} value={duration(data.left[key])} sub={`${timeWord} time, ${sideLabel(data.left)}`} testId="diff-base-total" />
          <StatCard className="diff-stat" label={<SideLabel color={EXP_COLOR} text="Experiment" />} value={duration(data.right[key])} sub={`${timeWord} time, ${sideLabel(data.right)}`} testId="diff-exp-total" />
          <StatCard
            className="diff-stat"
            label="Delta"
            value={signedDuration(total)}
            valueClassName={deltaClass(total)}
            sub={`${deltaPct(data.left[key], data.right[key])}${total > 0 ? ' · experiment slower' : total < 0 ? ' · experiment faster' : ''}`}
            testId="diff-delta-total"
          />
        </div>
      </Card>

      <Card
        title="Time by child"
        subtitle={data.children.length ? `Baseline and experiment ${timeWord} time of each child, ${data.basis === 'per_step' ? 'per step' : 'whole span'}, and the delta accumulated from left to right · click a bar to drill down` : undefined}
        testId="diff-children-card"
        actions={pending ? <span className="muted small">Loading…</span> : undefined}
      >
        {data.children.length === 0 ? (
          <Empty title="No children">This node has no operators or modules below it to compare.</Empty>
        ) : (
          <>
            <Chart option={option} height={340} label="Baseline and experiment time by child" testId="diff-chart" onEvents={onEvents} />
            <ChildrenTable children={data.children} go={go} timeKey={key} />
          </>
        )}
      </Card>

      <Segmented value={state.diffTable} onChange={(v) => update({ diffTable: v })} label="Table" testId="diff-table-switch" options={[{ value: 'operators', label: 'Operators' }, { value: 'kernels', label: 'GPU kernels' }]} />
      {state.diffTable === 'operators' && <OperatorDeltas data={data} csvUrl={csvUrl} />}
    </>
  )
}

function SideLabel({ color, text }: { color: string; text: string }) {
  return (
    <>
      <span className="diff-dot" style={{ background: color }} />
      {text}
    </>
  )
}

function childrenOption(children: DiffChild[], theme: Theme, key: TimeKey): EChartsCoreOption {
  const c = chartColors(theme)
  const labels = children.map(childLabel)
  let acc = 0
  const accumulated = children.map((ch) => (acc += ch.delta[key]))
  const many = children.length > 24
  return {
    animation: false,
    textStyle: { fontFamily: FONT },
    grid: { left: 8, right: 16, top: 40, bottom: many ? 40 : 8, containLabel: true },
    legend: { top: 0, left: 0, itemWidth: 12, itemHeight: 12, itemGap: 16, textStyle: { color: c.text } },
    tooltip: {
      trigger: 'axis',
      axisPointer: { type: 'shadow' },
      ...tooltipBase(c),
      formatter: (params: { dataIndex: number }[]) => {
        if (!params.length) return ''
        const i = params[0].dataIndex
        const ch = children[i]
        const row = (name: string, color: string, value: string) =>
          `<tr><td><span style="display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;background:${color}"></span>${name}</td><td style="text-align:right;padding-left:16px">${value}</td></tr>`
        return (
          `<div style="font-weight:500;margin-bottom:4px;max-width:420px;white-space:normal;overflow-wrap:anywhere">${escapeHtml(labels[i])}</div>` +
          `<table style="border-spacing:0;font-size:12px">` +
          row(`Baseline (${escapeHtml(sideLabel(ch.left))})`, BASE_COLOR, duration(ch.left[key])) +
          row(`Experiment (${escapeHtml(sideLabel(ch.right))})`, EXP_COLOR, duration(ch.right[key])) +
          row('Delta', 'transparent', `${signedDuration(ch.delta[key])} (${deltaPct(ch.left[key], ch.right[key])})`) +
          row('Accumulated delta', DELTA_COLOR, signedDuration(accumulated[i])) +
          `</table>` +
          (ch.expandable ? '<div style="margin-top:4px;opacity:.7">Click to drill down</div>' : '')
        )
      },
    },
    xAxis: {
      type: 'category',
      data: labels,
      axisLabel: { color: c.muted, rotate: children.length > 6 ? 30 : 0, interval: 0, overflow: 'truncate', width: children.length > 6 ? 120 : 160, hideOverlap: true },
      axisLine: { lineStyle: { color: c.grid } },
      axisTick: { show: false },
      triggerEvent: true,
    },
    yAxis: {
      type: 'value',
      name: key === 'device_duration_us' ? 'Device time' : 'Host time',
      nameTextStyle: { color: c.muted, align: 'left' },
      axisLabel: { color: c.muted, formatter: (v: number) => duration(v) },
      splitLine: { lineStyle: { color: c.grid } },
    },
    dataZoom: many ? [{ type: 'slider', xAxisIndex: 0, height: 16, bottom: 4, startValue: 0, endValue: 23 }] : undefined,
    series: [
      { name: 'Baseline', type: 'bar', barMaxWidth: 36, itemStyle: { color: BASE_COLOR }, cursor: 'pointer', data: children.map((ch) => ch.left[key]) },
      { name: 'Experiment', type: 'bar', barMaxWidth: 36, itemStyle: { color: EXP_COLOR }, cursor: 'pointer', data: children.map((ch) => ch.right[key]) },
      {
        name: 'Accumulated delta',
        type: 'line',
        step: false,
        symbol: 'circle',
        symbolSize: 6,
        lineStyle: { color: DELTA_COLOR, width: 2 },
        itemStyle: { color: DELTA_COLOR },
        data: accumulated,
      },
    ],
  }
}

function ChildrenTable({ children, go, timeKey: key }: { children: DiffChild[]; go: (child: DiffChild) => void; timeKey: TimeKey }) {
  const what = key === 'device_duration_us' ? 'device time' : 'host time' 
  return (
    <div className="diff-children-scroll">
      <table className="simple-table diff-children" data-testid="diff-children">
        <thead>
          <tr>
            <th>Child</th>
            <th>Kind</th>
            <th className="right" title={`Baseline ${what}`}>Baseline</th>
            <th className="right" title={`Experiment ${what}`}>Experiment</th>
            <th className="right" title={`Experiment − baseline ${what}`}>Delta</th>
            <th className="right" title="Delta relative to the baseline">Delta %</th>
            <th className="right" title="Change of the child's time per step (device time where it has any, else host time) with its 95 % bootstrap interval over the steps; greyed rows are within noise">
              95 % interval
            </th>
          </tr>
        </thead>
        <tbody>
          {children.map((ch) => (
            <tr key={ch.path} data-path={ch.path} data-testid="diff-child" className={withinNoise(ch) ? 'diff-noise' : undefined} data-noise={withinNoise(ch) ? 'yes' : 'no'}>
              <td className="diff-child-name">
                {ch.expandable ? (
                  <button type="button" className="link-button" onClick={() => go(ch)} title="Drill down" data-testid="diff-drill">
                    {childLabel(ch)}
                  </button>
                ) : (
                  <span title="Nothing below to compare">{childLabel(ch)}</span>
                )}
              </td>
              <td className="muted">{ch.left.type === ch.right.type ? sideLabel(ch.left) : `${sideLabel(ch.left)} / ${sideLabel(ch.right)}`}</td>
              <td className="right" data-col="base" data-us={ch.left[key]}>
                {duration(ch.left[key])}
              </td>
              <td className="right" data-col="exp" data-us={ch.right[key]}>
                {duration(ch.right[key])}
              </td>
              <td className={`right ${deltaClass(ch.delta[key])}`} data-col="delta">
                {signedDuration(ch.delta[key])}
              </td>
              <td className={`right ${deltaClass(ch.delta[key])}`} data-col="delta_pct">
                {deltaPct(ch.left[key], ch.right[key])}
              </td>
              <IntervalCell child={ch} />
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}

// ---------------------------------------------------------------------------------------------

const GROUPS = [
  { key: 'calls', label: 'Calls', unit: '' },
  { key: 'host_total_us', label: 'Host total', unit: ' (us)' },
  { key: 'host_self_us', label: 'Host self', unit: ' (us)' },
  { key: 'device_total_us', label: 'Device total', unit: ' (us)' },
  { key: 'device_self_us', label: 'Device self', unit: ' (us)' },
] as const

type GroupKey = (typeof GROUPS)[number]['key']

/** base_/exp_/delta_ + a group's key: the numeric columns of an operator delta. */
type DeltaKey = Exclude<keyof OperatorDelta, 'name'>

function numberOf(row: OperatorDelta, key: DeltaKey): number {
  return row[key]
}

function OperatorDeltas({ data, csvUrl }: { data: DiffPayload; csvUrl: string }) {
  const hasDevice = useMemo(() => data.operator_deltas.some((r) => numberOf(r, 'base_device_total_us') > 0 || numberOf(r, 'exp_device_total_us') > 0), [data])
  const [groups, setGroups] = useState<Set<GroupKey>>(() => new Set<GroupKey>(['calls', hasDevice ? 'device_total_us' : 'host_total_us', 'host_total_us']))
  const [sort, setSort] = useState<SortState | null>(null)
  const [search, setSearch] = useState('')
  const query = useDebounced(search, 200).trim().toLowerCase()
  const sortKey = data.operator_sort
  const metric = sortKey.replace(/^delta_/, '')

  // Default order: largest |delta| of the main metric first.
  const rows = useMemo(() => {
    const list = query ? data.operator_deltas.filter((r) => r.name.toLowerCase().includes(query)) : data.operator_deltas
    return [...list].sort((a, b) => Math.abs(numberOf(b, sortKey)) - Math.abs(numberOf(a, sortKey)))
  }, [data, query, sortKey])

  const columns = useMemo(() => {
    const cols: Column<OperatorDelta>[] = [
      { key: 'name', header: 'Operator', width: 'minmax(220px, 3fr)', render: (r) => <span className="cell-name">{r.name}</span>, cellTitle: (r) => r.name, sortValue: (r) => r.name },
    ]
    for (const g of GROUPS) {
      if (!groups.has(g.key)) continue
      const fmt = g.key === 'calls' ? (v: number) => count(Math.round(v * 100) / 100) : duration
      cols.push(
        { key: `base_${g.key}`, header: `${g.label}\nbaseline`, title: `Baseline ${g.label.toLowerCase()}${g.unit}`, width: '96px', align: 'right', render: (r) => fmt(numberOf(r, `base_${g.key}`)), sortValue: (r) => numberOf(r, `base_${g.key}`) },
        { key: `exp_${g.key}`, header: `${g.label}\nexperiment`, title: `Experiment ${g.label.toLowerCase()}${g.unit}`, width: '96px', align: 'right', render: (r) => fmt(numberOf(r, `exp_${g.key}`)), sortValue: (r) => numberOf(r, `exp_${g.key}`) },
        {
          key: `delta_${g.key}`,
          header: `${g.label}\nΔ`,
          title: `Experiment − baseline${g.unit}`,
          width: '96px',
          align: 'right',
          render: (r) => {
            const v = numberOf(r, `delta_${g.key}`)
            return <span className={deltaClass(v)}>{g.key === 'calls' ? (v > 0 ? `+${count(v)}` : count(v)) : signedDuration(v)}</span>
          },
          sortValue: (r) => numberOf(r, `delta_${g.key}`),
        },
        {
          key: `pct_${g.key}`,
          header: `${g.label}\nΔ %`,
          title: `Delta relative to the baseline`,
          width: '104px',
          align: 'right',
          render: (r) => <span className={deltaClass(numberOf(r, `delta_${g.key}`))}>{deltaPct(numberOf(r, `base_${g.key}`), numberOf(r, `exp_${g.key}`))}</span>,
          cellTitle: (r) => deltaPct(numberOf(r, `base_${g.key}`), numberOf(r, `exp_${g.key}`)),
          sortValue: (r) => deltaPctValue(numberOf(r, `base_${g.key}`), numberOf(r, `exp_${g.key}`)),
        },
      )
    }
    return cols
  }, [groups])

  const toggle = (key: GroupKey) =>
    setGroups((prev) => {
      const next = new Set(prev)
      if (next.has(key)) next.delete(key)
      else next.add(key)
      return next
    })
  const rowKey = useCallback((r: OperatorDelta) => r.name, [])
  const metricLabel = GROUPS.find((g) => g.key === metric)?.label.toLowerCase() ?? metric

  return (
    <Card
      title="Operators"
      subtitle={
        <span data-testid="diff-ops-count">
          {count(rows.length)} operators under this node{sort ? '' : ` · sorted by |Δ ${metricLabel}|`}
          {data.basis === 'per_step' ? ' · per step' : ' · whole span'}
        </span>
      }
      testId="diff-ops-card"
      actions={<DownloadLink href={csvUrl} testId="diff-csv" />}
    >
      <div className="toolbar diff-ops-toolbar">
        <SearchBox value={search} onChange={setSearch} placeholder="Search operators" label="Search operators" testId="diff-ops-search" />
        <div className="diff-groups" role="group" aria-label="Column groups" data-testid="diff-groups">
          {GROUPS.map((g) => (
            <label key={g.key} className={`diff-group${groups.has(g.key) ? ' on' : ''}`}>
              <input type="checkbox" checked={groups.has(g.key)} onChange={() => toggle(g.key)} data-group={g.key} />
              {g.label}
            </label>
          ))}
        </div>
        {sort && (
          <button type="button" className="link-button" onClick={() => setSort(null)} data-testid="diff-ops-unsort">
            Sort by |Δ| again
          </button>
        )}
      </div>
      {data.operator_deltas.length === 0 ? (
        <Banner kind="info" title="No operators under this node" />
      ) : (
        <DataTable columns={columns} rows={rows} rowKey={rowKey} sort={sort} onSort={setSort} maxHeight={480} label="Operator deltas" testId="diff-ops" emptyText="No operator matches the search." />
      )}
    </Card>
  )
}
