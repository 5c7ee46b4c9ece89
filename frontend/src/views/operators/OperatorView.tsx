import { useCallback, useMemo } from 'react'
import { api, type OperatorGroupBy, type OperatorRow, type Pie, type Selection, type Slices } from '../../api'
import { Donut, pieOf } from '../../charts/Donut'
import { DataTable, formatSort, parseSort, type Column, type SortState } from '../../components/DataTable'
import { Card, DownloadLink, Empty, ErrorBanner, Loading, SearchBox, Segmented, TopNInput } from '../../components/ui'
import { count, duration, num2, us, yesNo } from '../../format'
import { chartSlices, parseTopN, useAsync, useDebounced } from '../../hooks'
import type { Theme } from '../../theme'
import type { OperatorState } from './state'
import { useViewStyle } from '../../components/style'
import css from './operators.css?inline'
import { Async } from '../../components/Async'
import { CompiledSection, RooflineSection } from './Efficiency'
import { jumpToSource } from './source'

interface Props {
  selection: Selection
  state: OperatorState
  update: (patch: Partial<OperatorState>) => void
  theme: Theme
}

const GROUPS: { value: OperatorGroupBy; label: string }[] = [
  { value: 'operator', label: 'Operator' },
  { value: 'operator_input_shape', label: 'Operator + input shape' },
]

export function OperatorView({ selection, state, update, theme }: Props) {
  useViewStyle('operators', css)
  const groupBy = state.opGroup
  const topN = parseTopN(useDebounced(state.opTopN, 400))
  const chartTopN = chartSlices(topN)
  const search = useDebounced(state.opSearch, 200).trim().toLowerCase()
  const selKey = `${selection.run}\u0000${selection.worker}\u0000${selection.span}\u0000${groupBy}`

  const table = useAsync('operators', selKey, (signal) => api.operators(selection, groupBy, signal))
  const pies = useAsync('operators/pies', `${selKey}\u0000${chartTopN}`, (signal) => api.operatorPies(selection, groupBy, chartTopN, signal))

  const data = table.status === 'ok' ? table.data : null
  const hasDevice = data?.has_device ?? false
  const defaultSort: SortState = { key: data?.sort_by ?? 'host_self_us', desc: true }
  const sort = state.opSort ? parseSort(state.opSort, defaultSort) : defaultSort

  // Search over all rows, then keep the top N by the default metric (only when asked), then the
  // user's sort. `matches` counts what the search found, before any top N.
  const [rows, matches] = useMemo(() => {
    if (!data) return [[], 0] as [OperatorRow[], number]
    let list = data.rows
    if (search) list = list.filter((r) => r.name.toLowerCase().includes(search))
    const found = list.length
    if (topN !== null && list.length > topN) {
      const key = data.sort_by
      list = [...list].sort((a, b) => (b[key] ?? 0) - (a[key] ?? 0)).slice(0, topN)
    }
    return [list, found] as const
  }, [data, search, topN])

  const columns = useMemo(() => operatorColumns(groupBy, hasDevice), [groupBy, hasDevice])
  const rowKey = useCallback((r: OperatorRow) => `${r.name}\u0000${r.input_shape ?? ''}`, [])
  const renderExpanded = useCallback(
    (r: OperatorRow) => <CallStacks selection={selection} groupBy={groupBy} row={r} hasDevice={hasDevice} />,
    [selection, groupBy, hasDevice],
  )

  const total = data?.rows.length ?? 0
  const anyStack = useMemo(() => Boolean(data?.rows.some((r) => r.has_call_stack)), [data])

  // Self times add up over operators, so the part of a self-time pie the top-N left out is known
  // from the table; total times nest, so their pies show the top N only.
  const pieData = useMemo(() => {
    if (pies.status !== 'ok') return null
    const withOther = (slices: Slices, key: 'device_self_us' | 'host_self_us'): Pie | null => {
      const pie = pieOf(slices)
      if (!pie || !data || pie.other > 0) return pie
      const all = data.rows.reduce((acc, r) => acc + (r[key] ?? 0), 0)
      const shown = pie.slices.reduce((acc, s) => acc + s.value, 0)
      const other = all - shown
      return other > Math.max(1e-6, all * 1e-6) ? { ...pie, other, total: all } : pie
    }
    return {
      device_self: withOther(pies.data.device_self, 'device_self_us'),
      device_total: pieOf(pies.data.device_total),
      host_self: withOther(pies.data.host_self, 'host_self_us'),
      host_total: pieOf(pies.data.host_total),
    }
  }, [pies, data])

  return (
    <div className="view operator" data-testid="operator-view">
      <div className="toolbar">
        <Segmented label="Group by" value={groupBy} options={GROUPS} onChange={(v) => update({ opGroup: v, opSort: '' })} testId="op-group" />
        <TopNInput value={state.opTopN} onChange={(v) => update({ opTopN: v })} testId="op-topn" />
        <SearchBox value={state.opSearch} onChange={(v) => update({ opSearch: v })} placeholder="Search operators" label="Search operators" testId="op-search" />
        <div className="spacer" />
        <DownloadLink href={api.operatorsCsvUrl(selection, groupBy)} testId="op-csv" />
      </div>

      <Card title="Time by operator" subtitle={`Top ${chartTopN} operators; in the self-time charts the rest is grouped as Other`} testId="op-pies">
        {pies.status === 'error' ? (
          <ErrorBanner error={pies.error} what="the operator charts" />
        ) : pies.status !== 'ok' || !pieData || table.status === 'pending' ? (
          <Loading progress={pies.status === 'pending' ? pies.progress : null} label="Loading charts" />
        ) : (
          <div className={`donut-grid${hasDevice ? ' four' : ' two'}`}>
            {hasDevice && (
              <>
                <Donut title="Device self time" pie={pieData.device_self} theme={theme} testId="pie-device-self" />
                <Donut title="Device total time" pie={pieData.device_total} theme={theme} testId="pie-device-total" />
              </>
            )}
            <Donut title="Host self time" pie={pieData.host_self} theme={theme} testId="pie-host-self" />
            <Donut title="Host total time" pie={pieData.host_total} theme={theme} testId="pie-host-total" />
          </div>
        )}
      </Card>

      <Card
        title="Operators"
        subtitle={
          data ? (
            <span data-testid="op-count">
              {search ? `${count(matches)} of ${count(total)} ${groupBy === 'operator' ? 'operators' : 'operator + shape groups'} match “${state.opSearch.trim()}”` : `${count(total)} ${groupBy === 'operator' ? 'operators' : 'operator + shape groups'}`}
              {rows.length < matches ? ` · top ${count(rows.length)} shown` : ''}
              {!hasDevice ? ' · CPU-only trace' : ''}
            </span>
          ) : undefined
        }
        testId="op-table-card"
      >
        <Async state={table} what="the operator table" label="Loading operators">
          {() =>
            total === 0 ? (
            <Empty title="No operators">This span recorded no operator events.</Empty>
          ) : (
            <DataTable
              columns={columns}
              rows={rows}
              rowKey={rowKey}
              sort={sort}
              onSort={(s) => update({ opSort: formatSort(s) })}
              label="Operators"
              testId="op-table"
              emptyText="No operator matches the search."
              canExpand={(r) => Boolean(r.has_call_stack)}
              renderExpanded={anyStack ? renderExpanded : undefined}
            />
          )
          }
        </Async>
      </Card>

      <CompiledSection selection={selection} />
      <RooflineSection selection={selection} theme={theme} />
    </div>
  )
}

function operatorColumns(groupBy: OperatorGroupBy, hasDevice: boolean): Column<OperatorRow>[] {
  const cols: Column<OperatorRow>[] = [
    {
      key: 'name',
      header: 'Name',
      width: 'minmax(180px, 3fr)',
      render: (r) => <span className="cell-name">{r.name}</span>,
      cellTitle: (r) => r.name,
      sortValue: (r) => r.name,
    },
  ]
  if (groupBy === 'operator_input_shape') {
    cols.push({
      key: 'input_shape',
      header: 'Input shape',
      width: 'minmax(160px, 2fr)',
      render: (r) => <span className="mono cell-name">{r.input_shape ?? ''}</span>,
      cellTitle: (r) => r.input_shape,
      sortValue: (r) => r.input_shape ?? '',
    })
  }
  cols.push({
    key: 'category',
    header: 'Category',
    title: 'Op category: by the operator name, else by the kernels it launched itself (README: Op categories)',
    width: '112px',
    render: (r) => r.category,
    sortValue: (r) => r.category,
  })
  cols.push({ key: 'calls', header: 'Calls', title: 'Number of calls', width: '72px', align: 'right', render: (r) => count(r.calls), sortValue: (r) => r.calls })
  if (hasDevice) {
    cols.push(
      { key: 'device_self_us', header: 'Device self\ntime', title: "GPU time of the kernels the operator itself launched (not its children's)", width: '112px', align: 'right', render: (r) => duration(r.device_self_us), sortValue: (r) => r.device_self_us },
      { key: 'device_total_us', header: 'Device total\ntime', title: 'GPU time of the kernels launched by the operator and its children', width: '112px', align: 'right', render: (r) => duration(r.device_total_us), sortValue: (r) => r.device_total_us },
    )
  }
  cols.push(
    { key: 'host_self_us', header: 'Host self\ntime', title: "CPU time in the operator itself, not in its children", width: '104px', align: 'right', render: (r) => duration(r.host_self_us), sortValue: (r) => r.host_self_us },
    { key: 'host_total_us', header: 'Host total\ntime', title: 'CPU time of the operator including its children (wall time of its calls)', width: '104px', align: 'right', render: (r) => duration(r.host_total_us), sortValue: (r) => r.host_total_us },
  )
  if (hasDevice) {
    cols.push(
      {
        key: 'tc_eligible',
        header: 'Tensor Core\neligible',
        title: 'TC = Tensor Cores, the GPU units for matrix math: whether this operator can use them',
        width: '92px',
        align: 'right',
        render: (r) => yesNo(r.tc_eligible),
        sortValue: (r) => yesNo(r.tc_eligible),
        descFirst: true,
      },
      {
        key: 'tc_self_pct',
        header: 'Tensor Core\nself %',
        title: 'TC = Tensor Cores: share of the self device time spent in kernels that use them (percent)',
        width: '92px',
        align: 'right',
        render: (r) => num2(r.tc_self_pct),
        sortValue: (r) => r.tc_self_pct,
      },
      {
        key: 'tc_total_pct',
        header: 'Tensor Core\ntotal %',
        title: 'TC = Tensor Cores: share of the total device time spent in kernels that use them (percent)',
        width: '96px',
        align: 'right',
        render: (r) => num2(r.tc_total_pct),
        sortValue: (r) => r.tc_total_pct,
      },
    )
  }
  return cols
}

interface Frame {
  text: string
  file: string | null
  line: number | null
  func: string
}

function parseFrames(stack: string): Frame[] {
  return stack
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((text) => {
      const m = /^(.*)\((\d+)\):\s*(.*)$/.exec(text)
      return m ? { text, file: m[1], line: Number(m[2]), func: m[3] } : { text, file: null, line: null, func: text }
    })
}

function CallStacks({ selection, groupBy, row, hasDevice }: { selection: Selection; groupBy: OperatorGroupBy; row: OperatorRow; hasDevice: boolean }) {
  const key = `${selection.run}\u0000${selection.worker}\u0000${selection.span}\u0000${groupBy}\u0000${row.name}\u0000${row.input_shape ?? ''}`
  const state = useAsync('operators/stack', key, (signal) => api.operatorStacks(selection, groupBy, row.name, row.input_shape, signal))
  if (state.status !== 'ok')
    return (
      <div className="stacks">
        <Async state={state} what="the call stacks" label="Loading call stacks">
          {() => null}
        </Async>
      </div>
    )
  if (state.data.length === 0) return <div className="stacks muted">No call stack was recorded for this operator.</div>
  return (
    <div className="stacks" data-testid="call-stacks">
      {state.data.map((s, i) => (
        <div className="stack" key={i}>
          <div className="stack-stats">
            <span>{count(s.calls)} calls</span>
            <span>host self {us(s.host_self_us)} us</span>
            <span>host total {us(s.host_total_us)} us</span>
            {hasDevice && <span>device self {us(s.device_self_us)} us</span>}
            {hasDevice && <span>device total {us(s.device_total_us)} us</span>}
          </div>
          <ol className="frames">
            {parseFrames(s.call_stack ?? '').map((f, j) => (
              <li key={j}>
                {f.file && f.line !== null ? (
                  <button
                    type="button"
                    className="frame-link"
                    title={`Open ${f.file}:${f.line} in the editor (VS Code)`}
                    onClick={() => jumpToSource(f.file!, f.line!)}
                    data-testid="frame-link"
                  >
                    <span className="frame-func">{f.func || '(module)'}</span>
                    <span className="frame-file">
                      {f.file}:{f.line}
                    </span>
                  </button>
                ) : (
                  <span className="frame-plain">{f.text}</span>
                )}
              </li>
            ))}
          </ol>
        </div>
      ))}
    </div>
  )
}
