// Module view: the nn.Module tree with per-module statistics (expand/collapse, sortable within
// each level, search) and a flame graph of the same tree (click to zoom into a subtree).
import { useMemo, useState, type KeyboardEvent } from 'react'
import type { Selection } from '../../api'
import { Banner, Card, DownloadLink, Empty, SearchBox } from '../../components/ui'
import { count, us } from '../../format'
import { useAsync, useDebounced } from '../../hooks'
import { useViewStyle } from '../../components/style'
import { fetchModules, modulesCsvUrl, type ModuleRow, type Modules } from './api'
import { FlameGraph } from './FlameGraph'
import css from './modules.css?inline'
import { Async } from '../../components/Async'

interface Props {
  selection: Selection
}

export function ModuleView({ selection }: Props) {
  useViewStyle('modules', css)
  const state = useAsync('modules', `${selection.run}\u0000${selection.worker}\u0000${selection.span}`, (signal) => fetchModules(selection, signal))
  return (
    <Async state={state} what="the module view" label="Loading modules">
      {(data) => (data.available ? <ModuleContent data={data} csvUrl={modulesCsvUrl(selection)} /> : <NoModules message={data.message} />)}
    </Async>
  )
}

function NoModules({ message }: { message: string }) {
  return (
    <div className="view modules" data-testid="module-view">
      <Card title="Modules" testId="module-unavailable">
        <div className="module-help">
          <div className="module-help-title">No module information in this trace</div>
          {message && <p className="muted">{message}</p>}
          <p>Record the nn.Module hierarchy with Python stacks and module annotations on (PyTorch 1.10+):</p>
          <pre className="code">{`with torch.profiler.profile(
    activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
    schedule=torch.profiler.schedule(wait=1, warmup=1, active=3),
    on_trace_ready=torch.profiler.tensorboard_trace_handler("./log"),
    with_stack=True,      # Python call stacks
    with_modules=True,    # nn.Module boundaries
) as prof:
    for batch in loader:
        train_step(batch)
        prof.step()`}</pre>
          <p className="muted">The other views of this run are not affected.</p>
        </div>
      </Card>
    </div>
  )
}

// ---------------------------------------------------------------------------------------------

interface ColumnSpec {
  key: keyof ModuleRow
  header: string
  title: string
  width: number
}

function columnsOf(data: Modules): ColumnSpec[] {
  const cols: ColumnSpec[] = [
    { key: 'occurrences', header: 'Occurrences', title: 'Number of calls of this module at this place in the tree', width: 112 },
    { key: 'operators', header: 'Operators', title: 'Operators called directly by the module', width: 96 },
    { key: 'host_total_us', header: 'Host total (us)', title: 'Host time of all calls, including sub-modules', width: 128 },
    { key: 'host_self_us', header: 'Host self (us)', title: 'Host time of all calls, excluding sub-modules', width: 124 },
  ]
  if (data.has_device)
    cols.push(
      { key: 'device_total_us', header: 'Device total (us)', title: 'Device (GPU) time of the kernels launched by the module, including sub-modules', width: 136 },
      { key: 'device_self_us', header: 'Device self (us)', title: 'Device time excluding sub-modules', width: 132 },
    )
  if (data.has_backward)
    cols.push({ key: 'backward_host_us', header: 'Backward host (us)', title: 'Host time of the backward ops this module’s forward pass produced (fwdbwd flows)', width: 156 })
  if (data.has_backward && data.has_device)
    cols.push({ key: 'backward_device_us', header: 'Backward device (us)', title: 'Device time of the backward ops this module’s forward pass produced', width: 168 })
  return cols
}

interface Sort {
  key: keyof ModuleRow | 'name' | ''
  desc: boolean
}

const EXPAND_ALL_ROWS = 60

interface FlatRow {
  row: ModuleRow
  depth: number
  hasChildren: boolean
}

function ModuleContent({ data, csvUrl }: { data: Modules; csvUrl: string }) {
  const columns = useMemo(() => columnsOf(data), [data])
  // Every row with children, and how many rows the tree has.
  const { allKeys, moduleCount } = useMemo(() => {
    const keys: string[] = []
    let rows = 0
    const walk = (list: ModuleRow[]) =>
      list.forEach((r) => {
        rows += 1
        if (r.children.length) keys.push(r.key)
        walk(r.children)
      })
    walk(data.rows)
    return { allKeys: keys, moduleCount: rows }
  }, [data])
  // Small trees open fully; large ones show their top two levels.
  const [open, setOpen] = useState<Set<string>>(() => new Set(moduleCount <= EXPAND_ALL_ROWS ? allKeys : data.rows.map((r) => r.key)))
  const [sort, setSort] = useState<Sort>({ key: '', desc: true })
  const [search, setSearch] = useState('')
  const query = useDebounced(search, 200).trim().toLowerCase()

  // With a search: the matching rows and their ancestors, all expanded.
  const matching = useMemo(() => {
    if (!query) return null
    const keep = new Set<string>()
    const walk = (row: ModuleRow, ancestors: string[]): boolean => {
      let hit = row.name.toLowerCase().includes(query) || (row.module_type ?? '').toLowerCase().includes(query)
      for (const child of row.children) hit = walk(child, [...ancestors, row.key]) || hit
      if (hit) keep.add(row.key)
      return hit
    }
    data.rows.forEach((r) => walk(r, []))
    return keep
  }, [data, query])

  const flat = useMemo(() => {
    const out: FlatRow[] = []
    const order = (rows: ModuleRow[]) => {
      if (!sort.key) return rows
      const key = sort.key
      return [...rows].sort((a, b) => {
        const x = a[key as keyof ModuleRow]
        const y = b[key as keyof ModuleRow]
        const c = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).toLowerCase() < String(y).toLowerCase() ? -1 : String(x).toLowerCase() > String(y).toLowerCase() ? 1 : 0
        return sort.desc ? -c : c
      })
    }
    const walk = (rows: ModuleRow[], depth: number) => {
      for (const row of order(rows)) {
        if (matching && !matching.has(row.key)) continue
        out.push({ row, depth, hasChildren: row.children.length > 0 })
        if (row.children.length && (matching ? true : open.has(row.key))) walk(row.children, depth + 1)
      }
    }
    walk(data.rows, 0)
    return out
  }, [data, open, sort, matching])

  const toggle = (key: string) =>
    setOpen((prev) => {
      const next = new Set(prev)
      if (next.has(key)) next.delete(key)
      else next.add(key)
      return next
    })

  const onSort = (key: Sort['key']) =>
    setSort((prev) => (prev.key === key ? (prev.desc ? { key, desc: false } : { key: '', desc: true }) : { key, desc: key !== 'name' }))

  const template = `minmax(260px, 3fr) ${columns.map((c) => `${c.width}px`).join(' ')}`
  const valueLabel = data.has_device ? 'Device total' : 'Host total'

  return (
    <div className="view modules" data-testid="module-view">
      {data.warnings.length > 0 && (
        <Banner kind="warning" title="Some module statistics are incomplete" testId="module-warnings">
          <ul className="messages">
            {data.warnings.map((w, i) => (
              <li key={i}>{w}</li>
            ))}
          </ul>
        </Banner>
      )}
      <Card
        title="Flame graph"
        subtitle={`${valueLabel} time per module, nested as called${data.has_device ? '' : ' (CPU-only trace: host time)'} · click a box to zoom into it`}
        testId="module-flame-card"
      >
        {data.flamegraph.length === 0 ? <Empty title="No module time recorded" /> : <FlameGraph roots={data.flamegraph} valueLabel={valueLabel} testId="module-flame" />}
      </Card>
      <Card
        title="Modules"
        subtitle={
          <span data-testid="module-count">
            {data.rows.length} top-level module{data.rows.length === 1 ? '' : 's'}, {count(moduleCount)} in the tree · times are totals over all calls
            {data.has_backward && data.backward ? ` · backward time attributed through ${count(data.backward.matched)} forward/backward links` : ''}
          </span>
        }
        testId="module-table-card"
        actions={<DownloadLink href={csvUrl} testId="module-csv" />}
      >
        <div className="toolbar module-toolbar">
          <SearchBox value={search} onChange={setSearch} placeholder="Search modules" label="Search modules" testId="module-search" />
          <button type="button" className="button" onClick={() => setOpen(new Set(allKeys))} data-testid="module-expand-all">
            Expand all
          </button>
          <button type="button" className="button" onClick={() => setOpen(new Set())} data-testid="module-collapse-all">
            Collapse all
          </button>
        </div>
        <div className="tree-scroll" role="treegrid" aria-label="Modules" data-testid="module-tree" data-rows={flat.length}>
          <div className="tree-inner">
            <div className="table-header" role="row" style={{ gridTemplateColumns: template }}>
              <HeaderCell label="Module" sortKey="name" sort={sort} onSort={onSort} />
              {columns.map((c) => (
                <HeaderCell key={c.key} label={c.header} title={c.title} sortKey={c.key} sort={sort} onSort={onSort} right />
              ))}
            </div>
            {flat.length === 0 ? (
              <div className="table-empty">No module matches the search.</div>
            ) : (
              flat.map(({ row, depth, hasChildren }, i) => {
                const isOpen = matching ? true : open.has(row.key)
                return (
                  <div
                    key={row.key}
                    className={`tr tree-row${i % 2 ? ' odd' : ''}`}
                    role="row"
                    aria-level={depth + 1}
                    aria-expanded={hasChildren ? isOpen : undefined}
                    style={{ gridTemplateColumns: template }}
                    data-testid="module-row"
                    data-key={row.key}
                    data-name={row.name}
                  >
                    <div className="td tree-name" role="gridcell" style={{ paddingLeft: 8 + depth * 20 }} title={row.module_type ? `${row.name} (${row.module_type})` : row.name}>
                      {hasChildren ? (
                        <button
                          type="button"
                          className="icon-button tree-toggle"
                          aria-label={isOpen ? `Collapse ${row.name}` : `Expand ${row.name}`}
                          onClick={() => toggle(row.key)}
                          disabled={Boolean(matching)}
                          data-testid="module-toggle"
                        >
                          <span className={`chevron${isOpen ? ' open' : ''}`} aria-hidden="true" />
                        </button>
                      ) : (
                        <span className="tree-leaf" aria-hidden="true" />
                      )}
                      <span className="cell-name">{row.name}</span>
                      {row.missing_calls ? (
                        <span className="chip medium" title={`${row.missing_calls} calls have no operator-tree node; their time is not counted`}>
                          incomplete
                        </span>
                      ) : null}
                    </div>
                    {columns.map((c) => (
                      <div key={c.key} className="td right" role="gridcell" data-col={c.key}>
                        {c.key === 'occurrences' || c.key === 'operators' ? count(row[c.key] as number) : us(row[c.key] as number | undefined)}
                      </div>
                    ))}
                  </div>
                )
              })
            )}
          </div>
        </div>
      </Card>
    </div>
  )
}

function HeaderCell({
  label,
  title,
  sortKey,
  sort,
  onSort,
  right,
}: {
  label: string
  title?: string
  sortKey: Sort['key']
  sort: Sort
  onSort: (key: Sort['key']) => void
  right?: boolean
}) {
  const active = sort.key === sortKey
  const onKey = (event: KeyboardEvent) => {
    if (event.key === 'Enter' || event.key === ' ') {
      event.preventDefault()
      onSort(sortKey)
    }
  }
  return (
    <div
      className={`th sortable${right ? ' right' : ''}${active ? ' active' : ''}`}
      role="columnheader"
      title={title ? `${title}. Sorts within each level; a third click restores the call order.` : 'Sorts within each level'}
      aria-sort={active ? (sort.desc ? 'descending' : 'ascending') : 'none'}
      tabIndex={0}
      onClick={() => onSort(sortKey)}
      onKeyDown={onKey}
      data-col={sortKey}
    >
      <span className="th-label">{label}</span>
      <span className="sort-icon" aria-hidden="true">
        {active ? (sort.desc ? '▼' : '▲') : '↕'}
      </span>
    </div>
  )
}
