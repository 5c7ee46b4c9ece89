// The Memory view's two tables: the alloc/free events (size filters, search) and the
// per-operator statistics, both of the zoomed range when there is one.
import { useCallback, useMemo, useState } from 'react'
import { DataTable, type Column, type SortState } from '../../components/DataTable'
import { Card, Loading, SearchBox, Segmented } from '../../components/ui'
import { bytes, count, msText, parseBytes, signedBytes } from '../../format'
import { useDebounced } from '../../hooks'
import type { MemoryEvent, MemoryOperator, MemoryPayload } from './api'

function SizeInput({ value, onChange, placeholder, label, testId }: { value: string; onChange: (v: string) => void; placeholder: string; label: string; testId: string }) {
  const parsed = parseBytes(value)
  const invalid = parsed !== null && !Number.isFinite(parsed)
  return (
    <input
      className={`input size-input${invalid ? ' invalid' : ''}`}
      value={value}
      placeholder={placeholder}
      aria-label={label}
      aria-invalid={invalid}
      title="A size in bytes, or with a unit: 512, 4 KiB, 1.5 MiB (K, M, G are powers of 1024)"
      onChange={(e) => onChange(e.target.value)}
      data-testid={testId}
      spellCheck={false}
    />
  )
}

const EVENT_SORT: SortState = { key: 'bytes', desc: true }

export function EventsCard({ data, device, origin, pending }: { data: MemoryPayload | null; device: string; origin: number; pending: boolean }) {
  const [search, setSearch] = useState('')
  const [minText, setMinText] = useState('')
  const [maxText, setMaxText] = useState('')
  const [sort, setSort] = useState<SortState>(EVENT_SORT)
  const query = useDebounced(search, 200).trim().toLowerCase()
  const min = parseBytes(useDebounced(minText, 300))
  const max = parseBytes(useDebounced(maxText, 300))

  const all = useMemo(() => (data ? data.events.rows.filter((r) => r.device === device) : []), [data, device])
  const rows = useMemo(
    () =>
      all.filter(
        (r) =>
          (!query || r.op.toLowerCase().includes(query)) &&
          (min === null || !Number.isFinite(min) || r.bytes >= min) &&
          (max === null || !Number.isFinite(max) || r.bytes <= max),
      ),
    [all, query, min, max],
  )
  const columns = useMemo(() => eventColumns(origin), [origin])
  const rowKey = useCallback((r: MemoryEvent, i: number) => `${r.alloc_t_us}\u0000${r.free_t_us}\u0000${r.bytes}\u0000${i}`, [])
  const filtered = query || (min !== null && Number.isFinite(min)) || (max !== null && Number.isFinite(max))

  return (
    <Card
      title="Allocations and frees"
      subtitle={
        data ? (
          <span data-testid="mem-events-count">
            {count(rows.length)} of {count(all.length)} events{filtered ? ' match the filters' : ''}
            {data.events.truncated ? ` · the ${count(data.events.rows.length)} largest of ${count(data.events.total)} are listed` : ''}
            {pending ? ' · updating…' : ''}
          </span>
        ) : undefined
      }
      testId="mem-events-card"
    >
      <div className="toolbar table-toolbar">
        <SearchBox value={search} onChange={setSearch} placeholder="Search operators" label="Search memory events by operator" testId="mem-events-search" />
        <div className="size-filter">
          <span className="muted">Size</span>
          <SizeInput value={minText} onChange={setMinText} placeholder="min" label="Minimum size" testId="mem-min-size" />
          <span className="muted">–</span>
          <SizeInput value={maxText} onChange={setMaxText} placeholder="max" label="Maximum size" testId="mem-max-size" />
        </div>
      </div>
      {!data ? (
        <Loading label="Loading the range" />
      ) : (
        <DataTable
          columns={columns}
          rows={rows}
          rowKey={rowKey}
          sort={sort}
          onSort={setSort}
          maxHeight={440}
          label="Memory allocation and free events"
          testId="mem-events"
          emptyText={all.length ? 'No event matches the filters.' : data.events.total === 0 && !data.range_us[0] && !data.range_us[1] ? 'No allocation could be paired with its free in this trace (see the notes at the bottom).' : 'No allocation or free in this range.'}
        />
      )}
    </Card>
  )
}

function eventColumns(origin: number): Column<MemoryEvent>[] {
  const rel = (t: number | null) => (t === null ? null : t - origin)
  return [
    { key: 'op', header: 'Operator', width: 'minmax(200px, 3fr)', render: (r) => <span className="cell-name">{r.op}</span>, cellTitle: (r) => r.op, sortValue: (r) => r.op },
    { key: 'bytes', header: 'Size', width: '104px', align: 'right', render: (r) => bytes(r.bytes), sortValue: (r) => r.bytes, cellTitle: (r) => `${count(r.bytes)} bytes` },
    {
      key: 'alloc_t_us',
      header: 'Allocated at (ms)',
      width: '132px',
      align: 'right',
      render: (r) => (r.alloc_t_us === null ? <span className="muted" title="Allocated before the profile started">before</span> : msText(rel(r.alloc_t_us))),
      sortValue: (r) => r.alloc_t_us,
      descFirst: false,
    },
    {
      key: 'free_t_us',
      header: 'Freed at (ms)',
      width: '120px',
      align: 'right',
      render: (r) => (r.free_t_us === null ? <span className="muted" title="Still allocated when the trace ended">not freed</span> : msText(rel(r.free_t_us))),
      sortValue: (r) => r.free_t_us,
      descFirst: false,
    },
    { key: 'duration_us', header: 'Lifetime (ms)', width: '116px', align: 'right', render: (r) => msText(r.duration_us), sortValue: (r) => r.duration_us },
  ]
}

type StatColumns = 'both' | 'inclusive' | 'self'
const STAT_COLUMNS: { value: StatColumns; label: string }[] = [
  { value: 'both', label: 'Both' },
  { value: 'inclusive', label: 'Inclusive' },
  { value: 'self', label: 'Self' },
]
const OP_SORT: SortState = { key: 'increase_bytes', desc: true }

export function OperatorsCard({ data, device, pending }: { data: MemoryPayload | null; device: string; pending: boolean }) {
  const [search, setSearch] = useState('')
  const [which, setWhich] = useState<StatColumns>('both')
  const [sort, setSort] = useState<SortState>(OP_SORT)
  const query = useDebounced(search, 200).trim().toLowerCase()
  const all = useMemo(() => (data ? data.operators.rows.filter((r) => r.device === device) : []), [data, device])
  const rows = useMemo(() => (query ? all.filter((r) => r.name.toLowerCase().includes(query)) : all), [all, query])
  const columns = useMemo(() => operatorColumns(which), [which])
  const shownSort = columns.some((c) => c.key === sort.key) ? sort : { key: which === 'self' ? 'self_increase_bytes' : 'increase_bytes', desc: true }
  const rowKey = useCallback((r: MemoryOperator) => r.name, [])
  return (
    <Card
      title="Memory by operator"
      subtitle={
        data ? (
          <span data-testid="mem-ops-count">
            {count(rows.length)} of {count(all.length)} operators · self = the operator's own allocations, inclusive = with the operators it called
            {pending ? ' · updating…' : ''}
          </span>
        ) : undefined
      }
      testId="mem-ops-card"
    >
      <div className="toolbar table-toolbar">
        <SearchBox value={search} onChange={setSearch} placeholder="Search operators" label="Search memory statistics by operator" testId="mem-ops-search" />
        <Segmented label="Columns" value={which} options={STAT_COLUMNS} onChange={setWhich} testId="mem-ops-columns" />
      </div>
      {!data ? (
        <Loading label="Loading the range" />
      ) : (
        <DataTable
          columns={columns}
          rows={rows}
          rowKey={rowKey}
          sort={shownSort}
          onSort={setSort}
          maxHeight={440}
          label="Memory statistics by operator"
          testId="mem-ops"
          emptyText={all.length ? 'No operator matches the search.' : 'No operator allocated memory in this range.'}
        />
      )}
    </Card>
  )
}

function operatorColumns(which: StatColumns): Column<MemoryOperator>[] {
  const name: Column<MemoryOperator> = {
    key: 'name',
    header: 'Operator',
    width: 'minmax(200px, 3fr)',
    render: (r) => <span className="cell-name">{r.name}</span>,
    cellTitle: (r) => r.name,
    sortValue: (r) => r.name,
  }
  const calls: Column<MemoryOperator> = { key: 'calls', header: 'Calls', width: '72px', align: 'right', render: (r) => count(r.calls), sortValue: (r) => r.calls }
  const sizeCol = (key: keyof MemoryOperator, header: string, title: string, signed = false): Column<MemoryOperator> => ({
    key,
    header,
    title,
    width: '132px',
    align: 'right',
    render: (r) => (signed ? signedBytes(r[key] as number) : bytes(r[key] as number)),
    cellTitle: (r) => `${count(r[key] as number)} bytes`,
    sortValue: (r) => r[key] as number,
  })
  const countCol = (key: keyof MemoryOperator, header: string, title: string): Column<MemoryOperator> => ({
    key,
    header,
    title,
    width: '112px',
    align: 'right',
    render: (r) => count(r[key] as number),
    sortValue: (r) => r[key] as number,
  })
  const inclusive = [
    sizeCol('increase_bytes', 'Size increase', 'Allocated minus freed, including the operators it called', true),
    countCol('alloc_count', 'Allocations', 'Number of allocations, including the operators it called'),
    sizeCol('alloc_bytes', 'Allocated', 'Bytes allocated, including the operators it called'),
  ]
  const self = [
    sizeCol('self_increase_bytes', 'Self increase', 'Allocated minus freed by the operator itself', true),
    countCol('self_alloc_count', 'Self allocations', 'Allocations made by the operator itself'),
    sizeCol('self_alloc_bytes', 'Self allocated', 'Bytes allocated by the operator itself'),
  ]
  if (which === 'inclusive') return [name, calls, ...inclusive]
  if (which === 'self') return [name, calls, ...self]
  return [name, calls, inclusive[0], self[0], inclusive[1], self[1], inclusive[2], self[2]]
}
