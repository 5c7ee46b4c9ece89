// Cross-rank parts of the Distributed view (issue 14): coverage, the matched-collective table
// (sortable, CSV), stragglers, bus bandwidth and the arrival-skew heat map.
import { useCallback, useMemo, useState } from 'react'
import { DataTable, type Column, type SortState } from '../../components/DataTable'
import { Banner, Card, Empty, Segmented } from '../../components/ui'
import { bytes, count, pct, us } from '../../format'
import type { Theme } from '../../theme'
import type { BandwidthRow, CollectiveRow, DistributedPayload, StragglerRow } from './api'

export function CoverageBanner({ data }: { data: DistributedPayload }) {
  const c = data.coverage
  if (c.complete) return null
  const sample = c.missing_ranks.length ? ` Missing ranks include ${c.missing_ranks.slice(0, 12).join(', ')}${c.missing > 12 ? ', …' : ''}.` : ''
  return (
    <Banner kind="warning" title={`${count(c.ranks_present)} of ${count(c.world_size ?? 0)} ranks present`} testId="dist-coverage">
      {c.message}
      {sample}
    </Banner>
  )
}

export function ClockNotes({ data }: { data: DistributedPayload }) {
  return (
    <ul className="dist-clocks" data-testid="dist-clocks">
      <li>
        <b>Per step:</b> {data.clocks.per_step}
      </li>
      <li>
        <b>Skew and waits:</b> {data.clocks.skew}
      </li>
    </ul>
  )
}

function gbps(value: number | null | undefined): string {
  return value == null ? '–' : `${value.toFixed(2)} GB/s`
}

const COLLECTIVE_COLUMNS: Column<CollectiveRow>[] = [
  { key: 'id', header: '#', width: '56px', align: 'right', render: (r) => r.id, sortValue: (r) => r.id, descFirst: false },
  { key: 'name', header: 'Collective', width: 'minmax(170px, 2fr)', render: (r) => <span className="cell-name">{`${r.name} #${r.seq}`}</span>, cellTitle: (r) => `${r.collective} · group ${r.group}`, sortValue: (r) => r.name },
  { key: 'step', header: 'Step', width: '64px', render: (r) => r.step ?? '–', sortValue: (r) => r.step },
  { key: 'ranks', header: 'Ranks', title: 'Ranks present / ranks in the group', width: '84px', align: 'right', render: (r) => `${r.ranks}/${r.group_size}`, sortValue: (r) => r.ranks },
  { key: 'bytes', header: 'Size', width: '92px', align: 'right', render: (r) => bytes(r.bytes), sortValue: (r) => r.bytes },
  { key: 'last_arriver', header: 'Last arriver', title: 'The rank everyone waited for (its wait is the shortest)', width: 'minmax(110px, 1fr)', render: (r) => r.last_arriver ?? '–', sortValue: (r) => r.last_arriver },
  { key: 'skew_us', header: 'Skew (us)', title: 'Longest minus shortest duration over the ranks: the longest wait', width: '96px', align: 'right', render: (r) => (r.skew_us == null ? '–' : us(r.skew_us)), sortValue: (r) => r.skew_us },
  { key: 'transfer_us', header: 'Transfer (us)', title: 'Shortest duration over the ranks (after the last arrival)', width: '104px', align: 'right', render: (r) => (r.transfer_us == null ? '–' : us(r.transfer_us)), sortValue: (r) => r.transfer_us },
  { key: 'algbw_gbps', header: 'Alg bw', title: 'Size / transfer time', width: '96px', align: 'right', render: (r) => gbps(r.algbw_gbps), sortValue: (r) => r.algbw_gbps },
  { key: 'busbw_gbps', header: 'Bus bw', title: 'Algorithm bandwidth x the nccl-tests factor (none for single-rank groups)', width: '96px', align: 'right', render: (r) => gbps(r.busbw_gbps), sortValue: (r) => r.busbw_gbps },
]

const CSV_FIELDS = ['id', 'group', 'name', 'collective', 'seq', 'step', 'ranks', 'group_size', 'complete', 'bytes', 'dtype', 'last_arriver', 'skew_us', 'transfer_us', 'latency_us', 'algbw_gbps', 'busbw_gbps'] as const

function csvCell(value: unknown): string {
  let text = value == null ? '' : String(value)
  if (/^[=+\-@]/.test(text)) text = `'${text}`
  return /[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text
}

/** The collective table as CSV (every row of the payload), as a data: URL. */
export function collectivesCsv(rows: CollectiveRow[]): string {
  const lines = [CSV_FIELDS.join(','), ...rows.map((r) => CSV_FIELDS.map((f) => csvCell(r[f])).join(','))]
  return `data:text/csv;charset=utf-8,${encodeURIComponent(lines.join('\n') + '\n')}`
}

export function CollectivesCard({ data, fileName }: { data: DistributedPayload; fileName: string }) {
  const [sort, setSort] = useState<SortState>({ key: 'skew_us', desc: true })
  const rows = data.collectives.rows
  const rowKey = useCallback((r: CollectiveRow) => String(r.id), [])
  const href = useMemo(() => collectivesCsv(rows), [rows])
  const note = data.collectives.truncated ? ` (the ${count(data.collectives.shown)} with the largest skew of ${count(data.collectives.total)})` : ''
  return (
    <Card
      title="Matched collectives"
      subtitle={<span data-testid="dist-coll-count">{`${count(rows.length)} collective${rows.length === 1 ? '' : 's'}${note} · ${data.matching.by === 'sequence' ? 'matched by (process group, sequence number)' : 'the n-th call of each op per process group on every rank'}`}</span>}
      actions={
        <a className="download-link" href={href} download={fileName} data-testid="dist-coll-csv">
          CSV
        </a>
      }
      testId="dist-coll-card"
    >
      <DataTable columns={COLLECTIVE_COLUMNS} rows={rows} rowKey={rowKey} sort={sort} onSort={setSort} maxHeight={420} label="Matched collectives" testId="dist-coll" emptyText="No collective was seen on the ranks." />
    </Card>
  )
}

const STRAGGLER_COLUMNS: Column<StragglerRow>[] = [
  { key: 'worker', header: 'Worker', width: 'minmax(140px, 2fr)', render: (r) => r.worker, sortValue: (r) => r.worker },
  { key: 'last', header: 'Arrived last', title: 'Collectives (with a skew) at which this rank arrived last', width: '112px', align: 'right', render: (r) => `${r.last} / ${r.collectives}`, sortValue: (r) => r.last },
  {
    key: 'kinds',
    header: 'Where',
    width: 'minmax(140px, 2fr)',
    render: (r) =>
      Object.entries(r.last_by_collective)
        .map(([k, v]) => `${k} ×${v}`)
        .join(', ') || '–',
  },
  { key: 'imposed_wait_us', header: 'Others waited (us)', title: 'Wait the other ranks spent on this rank', width: '150px', align: 'right', render: (r) => us(r.imposed_wait_us), sortValue: (r) => r.imposed_wait_us },
  { key: 'imposed_share', header: 'Share', title: 'Of all waiting', width: '80px', align: 'right', render: (r) => pct(r.imposed_share * 100), sortValue: (r) => r.imposed_share },
  { key: 'waited_us', header: 'It waited (us)', width: '120px', align: 'right', render: (r) => us(r.waited_us), sortValue: (r) => r.waited_us },
]

export function StragglersCard({ data }: { data: DistributedPayload }) {
  const [sort, setSort] = useState<SortState>({ key: 'imposed_wait_us', desc: true })
  const s = data.stragglers
  const rowKey = useCallback((r: StragglerRow) => r.worker, [])
  return (
    <Card title="Stragglers" subtitle={`${count(s.skewed_collectives)} collectives with a skew · ${us(s.total_wait_us)} us waited in all`} testId="dist-stragglers-card">
      {data.recommendations.map((text, i) => (
        <p key={i} className="dist-recommendation" data-testid="dist-recommendation">
          {text}
        </p>
      ))}
      <DataTable columns={STRAGGLER_COLUMNS} rows={s.rows} rowKey={rowKey} sort={sort} onSort={setSort} maxHeight={320} label="Stragglers" testId="dist-stragglers" emptyText="No rank waited for another." />
    </Card>
  )
}

export function BandwidthCard({ rows }: { rows: BandwidthRow[] }) {
  return (
    <Card title="Bus bandwidth" subtitle="nccl-tests conventions: busbw = algbw × 2(n-1)/n (all-reduce), (n-1)/n (all-gather, reduce-scatter, all-to-all), 1 (broadcast, reduce, send/recv)" testId="dist-bandwidth">
      {rows.length === 0 ? (
        <Empty title="No bandwidth to report">Single-rank groups, or collectives seen on one rank only, have none.</Empty>
      ) : (
        <table className="simple-table" data-testid="dist-bandwidth-table">
          <thead>
            <tr>
              <th>Collective</th>
              <th className="right">Ranks (n)</th>
              <th className="right">Calls</th>
              <th className="right">Size</th>
              <th className="right">Transfer (us)</th>
              <th className="right">Alg bw</th>
              <th className="right">Factor</th>
              <th className="right">Bus bw</th>
              <th className="right">Link peak</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={`${r.collective}-${r.group_size}`}>
                <td>{r.collective}</td>
                <td className="right">{r.group_size}</td>
                <td className="right">{count(r.calls)}</td>
                <td className="right">{bytes(r.bytes)}</td>
                <td className="right">{us(r.transfer_us)}</td>
                <td className="right">{gbps(r.algbw_gbps)}</td>
                <td className="right">{r.bus_factor == null ? '–' : r.bus_factor.toFixed(3)}</td>
                <td className="right">{gbps(r.busbw_gbps)}</td>
                <td className="right">{gbps(r.peak_gbps)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Card>
  )
}

function cellColor(value: number | null, max: number, theme: Theme): string {
  if (value == null) return 'transparent'
  const t = max > 0 ? Math.min(1, value / max) : 0
  const light = theme === 'dark' ? 22 + 38 * t : 95 - 50 * t
  return `hsl(${30 - 30 * t}, ${t > 0 ? 85 : 0}%, ${light}%)`
}

export function HeatMapCard({ data, theme }: { data: DistributedPayload; theme: Theme }) {
  const [mode, setMode] = useState<'collectives' | 'steps'>('collectives')
  const heat = data.heatmap
  const part = mode === 'collectives' ? heat.collectives : heat.steps
  const max = useMemo(() => Math.max(0, ...part.values.flat().map((v) => v ?? 0)), [part])
  const cols = part.columns.length
  return (
    <Card
      title="Arrival skew"
      subtitle={`Each rank's wait for the last arriver, us (darker: longer)${heat.note ? ` · ${heat.note}` : ''}`}
      actions={
        <Segmented
          value={mode}
          onChange={setMode}
          options={[
            { value: 'collectives', label: 'By collective' },
            { value: 'steps', label: 'By step' },
          ]}
          label="Heat map columns"
          testId="dist-heat-mode"
        />
      }
      testId="dist-heatmap"
    >
      {cols === 0 ? (
        <Empty title="No collective shared by two ranks" />
      ) : (
        <div className="dist-heat" style={{ gridTemplateColumns: `minmax(90px, max-content) repeat(${cols}, minmax(10px, 1fr))` }} data-testid="dist-heat-grid">
          <div />
          {part.columns.map((c, j) => (
            <div key={j} className="dist-heat-col" title={c}>
              {cols <= 16 ? c : ''}
            </div>
          ))}
          {heat.rows.map((row, i) => (
            <HeatRow key={row} label={row} values={part.values[i] ?? []} columns={part.columns} max={max} theme={theme} />
          ))}
        </div>
      )}
    </Card>
  )
}

function HeatRow({ label, values, columns, max, theme }: { label: string; values: (number | null)[]; columns: string[]; max: number; theme: Theme }) {
  return (
    <>
      <div className="dist-heat-row" title={label}>
        {label}
      </div>
      {columns.map((c, j) => {
        const v = values[j] ?? null
        return <div key={j} className="dist-heat-cell" data-value={v ?? ''} style={{ background: cellColor(v, max, theme) }} title={`${label} · ${c}: ${v == null ? 'not in this collective' : `${us(v)} us`}`} />
      })}
    </>
  )
}
