import { useCallback, useMemo } from 'react'
import { api, type KernelGroupBy, type KernelRow, type Pie, type Selection } from '../../api'
import { Donut, pieOf } from '../../charts/Donut'
import { DataTable, formatSort, parseSort, type Column, type SortState } from '../../components/DataTable'
import { Card, DownloadLink, Empty, ErrorBanner, Loading, SearchBox, Segmented, TopNInput } from '../../components/ui'
import { count, duration, num2, pct, yesNo } from '../../format'
import { chartSlices, parseTopN, useAsync, useDebounced } from '../../hooks'
import type { Theme } from '../../theme'
import type { KernelState } from './state'
import { Async } from '../../components/Async'

interface Props {
  selection: Selection
  state: KernelState
  update: (patch: Partial<KernelState>) => void
  theme: Theme
}

const GROUPS: { value: KernelGroupBy; label: string }[] = [
  { value: 'kernel', label: 'Kernel name' },
  { value: 'kernel_op_launch', label: 'Kernel + operator + launch config' },
]

const TC_USING = '#f57c00'
const TC_NOT_USING = '#90a4ae'

export function KernelView({ selection, state, update, theme }: Props) {
  const groupBy = state.kGroup
  const topN = parseTopN(useDebounced(state.kTopN, 400))
  const chartTopN = chartSlices(topN)
  const search = useDebounced(state.kSearch, 200).trim().toLowerCase()
  const opSearch = useDebounced(state.kOpSearch, 200).trim().toLowerCase()
  const selKey = `${selection.run}\u0000${selection.worker}\u0000${selection.span}`

  const table = useAsync('kernels', `${selKey}\u0000${groupBy}`, (signal) => api.kernels(selection, groupBy, signal))
  const pies = useAsync('kernels/pies', `${selKey}\u0000${chartTopN}`, (signal) => api.kernelPies(selection, chartTopN, signal))

  const data = table.status === 'ok' ? table.data : null
  const defaultSort: SortState = { key: 'total_us', desc: true }
  const sort = state.kSort ? parseSort(state.kSort, defaultSort) : defaultSort
  const opMode = groupBy === 'kernel_op_launch'

  // `matches` counts what the searches found, before any top N (shown only when asked).
  const [rows, matches] = useMemo(() => {
    if (!data) return [[], 0] as [KernelRow[], number]
    let list = data.rows
    if (search) list = list.filter((r) => r.name.toLowerCase().includes(search))
    if (opMode && opSearch) list = list.filter((r) => (r.operator ?? '').toLowerCase().includes(opSearch))
    const found = list.length
    if (topN !== null && list.length > topN) list = [...list].sort((a, b) => b.total_us - a.total_us).slice(0, topN)
    return [list, found] as const
  }, [data, search, opSearch, opMode, topN])

  const hasBlocks = Boolean(data?.rows.some((r) => r.blocks_per_sm != null))
  const hasOcc = Boolean(data?.rows.some((r) => r.occupancy_pct != null))
  // "Tensor Cores" (NVIDIA) or "Matrix Cores" (AMD), as the backend says the vendor calls them
  const units = pies.status === 'ok' && pies.data.matrix_units === 'matrix cores' ? 'Matrix Cores' : 'Tensor Cores'
  const columns = useMemo(() => kernelColumns(opMode, hasBlocks, hasOcc, units), [opMode, hasBlocks, hasOcc, units])
  const rowKey = useCallback(
    (r: KernelRow, i: number) =>
      opMode ? `${r.name}\u0000${r.operator}\u0000${r.grid}\u0000${r.block}\u0000${r.registers_per_thread}\u0000${r.shared_memory}\u0000${i}` : r.name,
    [opMode],
  )

  const tcPie: Pie | null = useMemo(() => {
    if (pies.status !== 'ok' || pies.data.tensor_cores === null) return null
    const r = Math.min(1, Math.max(0, pies.data.tensor_cores.using))
    const slices = [
      { name: `Using ${units}`, value: r },
      { name: `Not using ${units}`, value: 1 - r },
    ].filter((s) => s.value > 0)
    return { slices, other: 0, total: 1 }
  }, [pies, units])
  const tcColors = useMemo(() => (tcPie ? tcPie.slices.map((s) => (s.name.startsWith('Using') ? TC_USING : TC_NOT_USING)) : []), [tcPie])
  const tcRatio = pies.status === 'ok' ? (pies.data.tensor_cores?.using ?? null) : null

  // Kernel time adds up, so what the top-N pie leaves out is known from the table.
  const kernelPie: Pie | null = useMemo(() => {
    if (pies.status !== 'ok') return null
    const pie = pieOf(pies.data.total)
    if (!pie || !data || pie.other > 0) return pie
    const all = data.rows.reduce((acc, r) => acc + (r.total_us ?? 0), 0)
    const shown = pie.slices.reduce((acc, s) => acc + s.value, 0)
    const other = all - shown
    return other > Math.max(1e-6, all * 1e-6) ? { ...pie, other, total: all } : pie
  }, [pies, data])

  const total = data?.rows.length ?? 0

  return (
    <div className="view kernel" data-testid="kernel-view">
      <div className="toolbar">
        <Segmented label="Group by" value={groupBy} options={GROUPS} onChange={(v) => update({ kGroup: v, kSort: '' })} testId="k-group" />
        <TopNInput value={state.kTopN} onChange={(v) => update({ kTopN: v })} testId="k-topn" />
        <SearchBox value={state.kSearch} onChange={(v) => update({ kSearch: v })} placeholder="Search kernels" label="Search kernels" testId="k-search" />
        {opMode && (
          <SearchBox value={state.kOpSearch} onChange={(v) => update({ kOpSearch: v })} placeholder="Search operators" label="Search operators" testId="k-op-search" />
        )}
        <div className="spacer" />
        <DownloadLink href={api.kernelsCsvUrl(selection, groupBy)} testId="k-csv" />
      </div>

      <Card title="Kernel time" subtitle={`Top ${chartTopN} kernels; the rest is grouped as Other`} testId="k-pies">
        {pies.status === 'error' ? (
          <ErrorBanner error={pies.error} what="the kernel charts" />
        ) : pies.status !== 'ok' || table.status === 'pending' ? (
          <Loading progress={pies.status === 'pending' ? pies.progress : null} label="Loading charts" />
        ) : (
          <div className="donut-grid two">
            <Donut title="Total time by kernel" pie={kernelPie} theme={theme} testId="pie-kernels" height={260} />
            <Donut
              title={`Kernel time using ${units}`}
              pie={tcPie}
              theme={theme}
              unit="ratio"
              colors={tcColors}
              centerLabel={tcRatio !== null ? pct(tcRatio * 100) : undefined}
              testId="pie-tensor-cores"
              height={260}
              emptyText={`${units} usage unknown`}
            />
          </div>
        )}
      </Card>

      <Card
        title="Kernels"
        subtitle={
          data ? (
            <span data-testid="k-count">
              {search || (opMode && opSearch) ? `${count(matches)} of ${count(total)} ${opMode ? 'kernel groups' : 'kernels'} match` : `${count(total)} ${opMode ? 'kernel groups' : 'kernels'}`}
              {rows.length < matches ? ` · top ${count(rows.length)} shown` : ''}
            </span>
          ) : undefined
        }
        testId="k-table-card"
      >
        {data && data.categories.some((c) => c.time_us > 0) && (
          <p className="muted" data-testid="k-categories">
            By category:{' '}
            {data.categories
              .filter((c) => c.time_us > 0)
              .map((c) => `${c.category} ${duration(c.time_us)} (${pct(c.pct)})`)
              .join(' · ')}
          </p>
        )}
        <Async state={table} what="the kernel table" label="Loading kernels">
          {() =>
            total === 0 ? (
            <Empty title="No kernels">This span launched no GPU kernels.</Empty>
          ) : (
            <DataTable
              columns={columns}
              rows={rows}
              rowKey={rowKey}
              sort={sort}
              onSort={(s) => update({ kSort: formatSort(s) })}
              label="Kernels"
              testId="k-table"
              emptyText="No kernel matches the search."
            />
          )
          }
        </Async>
      </Card>
    </div>
  )
}

function kernelColumns(opMode: boolean, hasBlocks: boolean, hasOcc: boolean, units: string): Column<KernelRow>[] {
  const [first, second] = units.split(' ')
  const cols: Column<KernelRow>[] = [
    {
      key: 'name',
      header: 'Name',
      width: 'minmax(240px, 4fr)',
      render: (r) => <span className="cell-name mono-ish">{r.name}</span>,
      cellTitle: (r) => r.name,
      sortValue: (r) => r.name,
    },
    {
      key: 'category',
      header: 'Category',
      title: 'Op category: by the operator that launched the kernel, else by its name (README: Op categories)',
      width: '112px',
      render: (r) => r.category,
      sortValue: (r) => r.category,
    },
  ]
  if (opMode) {
    cols.push(
      {
        key: 'operator',
        header: 'Operator',
        width: 'minmax(160px, 2fr)',
        render: (r) => <span className="cell-name">{r.operator ?? 'N/A'}</span>,
        cellTitle: (r) => r.operator,
        sortValue: (r) => r.operator ?? '',
      },
      { key: 'grid', header: 'Grid', width: '112px', render: (r) => <span className="mono">{r.grid ?? '–'}</span>, sortValue: (r) => r.grid ?? '' },
      { key: 'block', header: 'Block', width: '112px', render: (r) => <span className="mono">{r.block ?? '–'}</span>, sortValue: (r) => r.block ?? '' },
      {
        key: 'registers_per_thread',
        header: 'Registers\nper thread',
        title: 'Registers each thread of the kernel uses',
        width: '100px',
        align: 'right',
        render: (r) => String(r.registers_per_thread ?? '–'),
        sortValue: (r) => (r.registers_per_thread == null ? null : Number(r.registers_per_thread)),
      },
      {
        key: 'shared_memory',
        header: 'Shared\nmemory',
        title: 'Shared memory per block, bytes',
        width: '104px',
        align: 'right',
        render: (r) => String(r.shared_memory ?? '–'),
        sortValue: (r) => (r.shared_memory == null ? null : Number(r.shared_memory)),
      },
    )
  }
  cols.push({
    key: 'tensor_cores',
    header: `Uses ${first}\n${second}`,
    title: `${units} are the GPU units for matrix math: whether this kernel runs on them`,
    width: '100px',
    align: 'right',
    render: (r) => yesNo(r.tensor_cores),
    sortValue: (r) => yesNo(r.tensor_cores),
    descFirst: true,
  })
  if (opMode) {
    cols.push({
      key: 'op_tc_eligible',
      header: `Operator ${first === 'Matrix' ? 'MC' : 'TC'}\neligible`,
      title: `${first === 'Matrix' ? 'MC' : 'TC'} = ${units}: whether the operator that launched the kernel could use them`,
      width: '116px',
      align: 'right',
      render: (r) => yesNo(r.op_tc_eligible),
      sortValue: (r) => yesNo(r.op_tc_eligible),
      descFirst: true,
    })
  }
  cols.push(
    { key: 'calls', header: 'Calls', title: 'Number of launches', width: '72px', align: 'right', render: (r) => count(r.calls), sortValue: (r) => r.calls },
    { key: 'total_us', header: 'Total\ntime', title: 'Sum of the kernel durations', width: '100px', align: 'right', render: (r) => duration(r.total_us), sortValue: (r) => r.total_us },
    { key: 'mean_us', header: 'Mean\nduration', title: 'Mean duration of one launch', width: '96px', align: 'right', render: (r) => duration(r.mean_us), sortValue: (r) => r.mean_us },
    { key: 'max_us', header: 'Max\nduration', title: 'Longest launch', width: '96px', align: 'right', render: (r) => duration(r.max_us), sortValue: (r) => r.max_us },
    { key: 'min_us', header: 'Min\nduration', title: 'Shortest launch', width: '96px', align: 'right', render: (r) => duration(r.min_us), sortValue: (r) => r.min_us },
  )
  if (hasBlocks) {
    cols.push({
      key: 'blocks_per_sm',
      header: 'Blocks/SM',
      title: 'Mean blocks per SM (time-weighted); below 1 means the GPU is not filled',
      width: '92px',
      align: 'right',
      render: (r) => num2(r.blocks_per_sm),
      sortValue: (r) => r.blocks_per_sm,
    })
  }
  if (hasOcc) {
    cols.push({
      key: 'occupancy_pct',
      header: 'Est. achieved\noccupancy %',
      title: 'Mean estimated achieved occupancy (time-weighted), percent',
      width: '108px',
      align: 'right',
      render: (r) => num2(r.occupancy_pct),
      sortValue: (r) => r.occupancy_pct,
    })
  }
  return cols
}

