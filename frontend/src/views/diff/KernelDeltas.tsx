// The Diff view's kernel table: every GPU kernel of both traces (all threads), by kernel name or
// by launching operator -> kernel, sorted by |delta| of total time, on the page's basis; CSV.
import { useCallback, useMemo, useState } from 'react'
import type { Selection } from '../../api'
import { DataTable, type Column, type SortState } from '../../components/DataTable'
import { Banner, Card, DownloadLink, ErrorBanner, Loading, SearchBox, Segmented } from '../../components/ui'
import { count, deltaPct, duration, signedDuration } from '../../format'
import { useAsync, useDebounced } from '../../hooks'
import { diffKernelsCsvUrl, fetchDiffKernels, type Basis, type Experiment, type KernelDelta, type KernelGrouping } from './api'
import type { DiffState } from './state'

function deltaClass(value: number): string {
  return value > 0 ? 'delta-up' : value < 0 ? 'delta-down' : ''
}

export function KernelDeltas({ selection, exp, basis }: { selection: Selection; exp: Experiment; basis: Basis; update: (patch: Partial<DiffState>) => void }) {
  const [groupBy, setGroupBy] = useState<KernelGrouping>('kernel')
  const [sort, setSort] = useState<SortState | null>(null)
  const [search, setSearch] = useState('')
  const query = useDebounced(search, 200).trim().toLowerCase()
  const key = [selection.run, selection.worker, selection.span, exp.exp_run, exp.exp_worker, exp.exp_span, groupBy, basis].join('\u0000')
  const state = useAsync('diff/kernels', key, (signal) => fetchDiffKernels(selection, exp, groupBy, basis, signal))
  const data = state.status === 'ok' ? state.data : state.status === 'pending' ? (state.previous ?? null) : null
  const rows = useMemo(() => {
    const all = data?.rows ?? []
    return query ? all.filter((r) => r.name.toLowerCase().includes(query) || (r.operator ?? '').toLowerCase().includes(query)) : all
  }, [data, query])
  const columns = useMemo(() => kernelColumns(groupBy), [groupBy])
  const rowKey = useCallback((r: KernelDelta) => `${r.operator ?? ''}\u0000${r.name}`, [])
  const per = basis === 'per_step' ? 'per step' : 'whole span'
  return (
    <Card
      title="GPU kernels"
      subtitle={
        <span data-testid="diff-kernels-count">
          {data ? `${count(rows.length)} of ${count(data.rows.length)} ${groupBy === 'kernel' ? 'kernels' : 'operator → kernel pairs'} · all threads · ${per} · total ${duration(data.base_total_us)} vs ${duration(data.exp_total_us)} (${signedDuration(data.delta_total_us)})` : 'Loading…'}
          {sort ? '' : ' · sorted by |Δ total|'}
        </span>
      }
      testId="diff-kernels-card"
      actions={<DownloadLink href={diffKernelsCsvUrl(selection, exp, groupBy, basis)} testId="diff-kernels-csv" />}
    >
      <div className="toolbar diff-ops-toolbar">
        <SearchBox value={search} onChange={setSearch} placeholder="Search kernels or operators" label="Search kernels" testId="diff-kernels-search" />
        <Segmented value={groupBy} onChange={setGroupBy} label="Group by" testId="diff-kernels-group" options={[{ value: 'kernel', label: 'By kernel' }, { value: 'operator_kernel', label: 'By operator → kernel' }]} />
      </div>
      {state.status === 'error' ? (
        <ErrorBanner error={state.error} what="the kernel diff" />
      ) : !data ? (
        <Loading label="Comparing kernels" />
      ) : data.rows.length === 0 ? (
        <Banner kind="info" title="No GPU kernels in either trace" />
      ) : (
        <DataTable columns={columns} rows={rows} rowKey={rowKey} sort={sort} onSort={setSort} maxHeight={480} label="Kernel deltas" testId="diff-kernels" emptyText="No kernel matches the search." />
      )}
    </Card>
  )
}

function kernelColumns(groupBy: KernelGrouping): Column<KernelDelta>[] {
  const cols: Column<KernelDelta>[] = []
  if (groupBy === 'operator_kernel')
    cols.push({ key: 'operator', header: 'Operator', title: 'The operator that launched the kernel (N/A: launched outside any operator)', width: 'minmax(160px, 1.5fr)', render: (r) => <span className="cell-name">{r.operator}</span>, cellTitle: (r) => r.operator, sortValue: (r) => r.operator ?? '' })
  cols.push({ key: 'name', header: 'Kernel', title: 'GPU kernel name', width: 'minmax(240px, 3fr)', render: (r) => <span className="cell-name">{r.name}</span>, cellTitle: (r) => r.name, sortValue: (r) => r.name })
  const num = (key: keyof KernelDelta, header: string, title: string, fmt: (v: number) => string, cls = false): Column<KernelDelta> => ({
    key,
    header,
    title,
    width: '104px',
    align: 'right',
    render: (r) => {
      const v = Number(r[key])
      return cls ? <span className={deltaClass(v)}>{fmt(v)}</span> : fmt(v)
    },
    sortValue: (r) => Number(r[key]),
  })
  cols.push(
    num('base_calls', 'Calls\nbaseline', 'Baseline launches', (v) => count(Math.round(v * 100) / 100)),
    num('exp_calls', 'Calls\nexperiment', 'Experiment launches', (v) => count(Math.round(v * 100) / 100)),
    num('base_total_us', 'Total\nbaseline', 'Baseline kernel time', duration),
    num('exp_total_us', 'Total\nexperiment', 'Experiment kernel time', duration),
    num('delta_total_us', 'Total\nΔ', 'Experiment − baseline kernel time', signedDuration, true),
    { key: 'pct', header: 'Total\nΔ %', title: 'Delta relative to the baseline', width: '92px', align: 'right', render: (r) => <span className={deltaClass(r.delta_total_us)}>{deltaPct(r.base_total_us, r.exp_total_us)}</span> },
    num('base_mean_us', 'Mean\nbaseline', 'Baseline mean duration of one launch', duration),
    num('exp_mean_us', 'Mean\nexperiment', 'Experiment mean duration of one launch', duration),
  )
  return cols
}
