import { text, type SliceState } from '../../urlSlice'

/** The Trace view's part of the URL: the step whose critical path is highlighted (`t_crit`,
 * '' none), a window to show (`t_win`, "start,end" in absolute trace us, '' none: a
 * recommendation's evidence; cleared when the run, worker or span changes, ignored when it is
 * outside the trace), and the arranged track list (trackList.ts), each a comma separated list: pinned
 * track ids, hidden track ids, group order, collapsed groups. */
export const traceSlice = {
  tCrit: text('t_crit'),
  tWin: text('t_win'),
  trPin: text('tr_pin'),
  trHide: text('tr_hide'),
  trOrder: text('tr_order'),
  trFold: text('tr_fold'),
}

export type TraceUrlState = SliceState<typeof traceSlice>

/** The track-list part of the slice (what trackList.ts reads and writes). */
export type TrackListUrl = Pick<TraceUrlState, 'trPin' | 'trHide' | 'trOrder' | 'trFold'>

/** The `t_win` window as [start, end] trace us, or null when absent or malformed. */
export function parseWindow(value: string): [number, number] | null {
  const parts = value.split(',')
  if (parts.length !== 2) return null
  const [start, end] = parts.map(Number)
  return Number.isFinite(start) && Number.isFinite(end) && end > start ? [start, end] : null
}

/** The `t_win` value of a window (trace us). */
export function formatWindow(start: number, end: number): string {
  return `${start},${end}`
}
