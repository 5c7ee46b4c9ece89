// Process groups of the Distributed view (issue 28): per group, its nodes and locality (intra-
// or inter-node), traffic, bus bandwidth against its link's peak, and its own straggler.
import { useCallback, useState } from 'react'
import { DataTable, type Column, type SortState } from '../../components/DataTable'
import { Card } from '../../components/ui'
import { bytes, count, pct, us } from '../../format'
import type { DistributedPayload, GroupRow } from './api'

function gbps(value: number | null | undefined): string {
  return value == null ? '–' : `${value.toFixed(2)} GB/s`
}

const GROUP_COLUMNS: Column<GroupRow>[] = [
  { key: 'group', header: 'Group', width: 'minmax(80px, 1fr)', render: (r) => r.group, cellTitle: (r) => r.workers.join(', '), sortValue: (r) => r.group },
  { key: 'size', header: 'Ranks', title: 'Ranks present / ranks in the group', width: '84px', align: 'right', render: (r) => `${r.ranks_present}/${r.size}`, sortValue: (r) => r.size },
  { key: 'locality', header: 'Locality', title: 'One node or several (nodes from the trace)', width: 'minmax(110px, 1fr)', render: (r) => (r.locality == null ? 'unknown' : `${r.locality} (${r.nodes} node${r.nodes === 1 ? '' : 's'})`), sortValue: (r) => r.locality },
  { key: 'collectives', header: 'Collectives', width: '96px', align: 'right', render: (r) => count(r.collectives), sortValue: (r) => r.collectives },
  { key: 'bytes', header: 'Size', width: '92px', align: 'right', render: (r) => bytes(r.bytes), sortValue: (r) => r.bytes },
  { key: 'busbw_gbps', header: 'Bus bw', title: 'Transfer-weighted mean bus bandwidth', width: '96px', align: 'right', render: (r) => gbps(r.busbw_gbps), sortValue: (r) => r.busbw_gbps },
  { key: 'peak_gbps', header: 'Link peak', width: 'minmax(120px, 1fr)', render: (r) => (r.peak_gbps == null ? '–' : `${gbps(r.peak_gbps)}`), cellTitle: (r) => r.link ?? 'unknown link', sortValue: (r) => r.peak_gbps },
  { key: 'total_wait_us', header: 'Waiting (us)', title: "Members' waiting at the group's collectives", width: '110px', align: 'right', render: (r) => us(r.total_wait_us), sortValue: (r) => r.total_wait_us },
  { key: 'straggler', header: 'Straggler', title: 'The member imposing at least half of the waiting', width: 'minmax(120px, 1fr)', render: (r) => (r.straggler ? `${r.straggler} (${pct(r.straggler_share * 100)})` : '–'), sortValue: (r) => r.straggler_share },
]

export function ProcessGroupsCard({ data }: { data: DistributedPayload }) {
  const [sort, setSort] = useState<SortState>({ key: 'total_wait_us', desc: true })
  const rowKey = useCallback((r: GroupRow) => r.group, [])
  const groups = data.groups
  const more = groups.total > groups.rows.length ? ` (the ${count(groups.rows.length)} with the most waiting)` : ''
  return (
    <Card title="Process groups" subtitle={`${count(groups.total)} group${groups.total === 1 ? '' : 's'}${more} · ${data.matching.note}`} testId="dist-groups-card">
      <DataTable columns={GROUP_COLUMNS} rows={groups.rows} rowKey={rowKey} sort={sort} onSort={setSort} maxHeight={320} label="Process groups" testId="dist-groups" emptyText="No process group with collectives." />
    </Card>
  )
}
