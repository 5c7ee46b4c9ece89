import { text, type SliceState } from '../../urlSlice'

/** The Trace view's part of the URL: the step whose critical path is highlighted (`t_crit`,
 * '' none), and the arranged track list (trackList.ts), each a comma separated list: pinned
 * track ids, hidden track ids, group order, collapsed groups. */
export const traceSlice = {
  tCrit: text('t_crit'),
  trPin: text('tr_pin'),
  trHide: text('tr_hide'),
  trOrder: text('tr_order'),
  trFold: text('tr_fold'),
}

export type TraceUrlState = SliceState<typeof traceSlice>

/** The track-list part of the slice (what trackList.ts reads and writes). */
export type TrackListUrl = Pick<TraceUrlState, 'trPin' | 'trHide' | 'trOrder' | 'trFold'>
