// The aggregate of a selected time range (Shift+drag on the timeline, or a drag on the time
// ruler for every track): per event name, how many events overlap it, their time inside it and
// their self time, sortable, with CSV (`/timeline/range`).
import { useCallback, useMemo, useState } from 'react'
import type { Selection } from '../../api'
import { DataTable, type Column, type SortState } from '../../components/DataTable'
import { DownloadLink, ErrorBanner, Loading } from '../../components/ui'
import { count } from '../../format'
import { useAsync } from '../../hooks'
import { traceApi, type RangeRow } from './api'
import { fmtDuration } from './timefmt'

export interface RangeSel {
  start: number
  end: number
  tracks: number[]
}

const COLUMNS: Column<RangeRow>[] = [
  { key: 'name', header: 'Name', title: 'Event name', width: 'minmax(240px, 4fr)', render: (r) => <span className="cell-name">{r.name}</span>, cellTitle: (r) => r.name, sortValue: (r) => r.name },
  { key: 'count', header: 'Count', title: 'Events of that name overlapping the range', width: '80px', align: 'right', render: (r) => count(r.count), sortValue: (r) => r.count },
  { key: 'total_us', header: 'Total\ntime', title: 'Their time inside the range (each event clipped to it)', width: '104px', align: 'right', render: (r) => fmtDuration(r.total_us), sortValue: (r) => r.total_us },
  { key: 'self_us', header: 'Self\ntime', title: 'Total time minus that of their direct children', width: '104px', align: 'right', render: (r) => fmtDuration(r.self_us), sortValue: (r) => r.self_us },
  { key: 'avg_us', header: 'Average', title: 'Total time / count', width: '96px', align: 'right', render: (r) => fmtDuration(r.avg_us), sortValue: (r) => r.avg_us },
]

export function RangePanel({ selection, range, onClose }: { selection: Selection; range: RangeSel; onClose: () => void }) {
  const [sort, setSort] = useState<SortState | null>({ key: 'total_us', desc: true })
  const key = [selection.run, selection.worker, selection.span, range.start, range.end, range.tracks.join(',')].join('\u0000')
  const state = useAsync('timeline/range', key, (signal) => traceApi.range(selection, range.start, range.end, range.tracks, signal))
  const rowKey = useCallback((r: RangeRow) => r.name, [])
  const rows = useMemo(() => (state.status === 'ok' ? state.data.rows : []), [state])
  return (
    <aside className="trace-details trace-range" data-testid="trace-range" aria-label="Selected range">
      <div className="trace-details-head">
        <span className="trace-details-title" data-testid="trace-range-title">
          {fmtDuration(range.end - range.start)} selected on {count(range.tracks.length)} track{range.tracks.length === 1 ? '' : 's'}
          {state.status === 'ok' ? ` · ${count(state.data.events)} events, ${count(rows.length)} names` : ''}
        </span>
        <DownloadLink href={traceApi.rangeCsvUrl(selection, range.start, range.end, range.tracks)} testId="trace-range-csv" />
        <button type="button" className="link-button" onClick={onClose} data-testid="trace-range-close">
          Close
        </button>
      </div>
      {state.status === 'error' ? (
        <ErrorBanner error={state.error} what="the range aggregate" />
      ) : state.status !== 'ok' ? (
        <Loading label="Aggregating the range" />
      ) : (
        <DataTable columns={COLUMNS} rows={rows} rowKey={rowKey} sort={sort} onSort={setSort} maxHeight={190} rowHeight={28} label="Range aggregate" testId="trace-range-table" emptyText="No event in this range." />
      )}
    </aside>
  )
}
