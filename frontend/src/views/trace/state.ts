import { text, type SliceState } from '../../urlSlice'

/** The Trace view's part of the URL: the arranged track list (trackList.ts), each a comma
 * separated list: pinned track ids, hidden track ids, group order, collapsed groups. */
export const traceSlice = {
  trPin: text('tr_pin'),
  trHide: text('tr_hide'),
  trOrder: text('tr_order'),
  trFold: text('tr_fold'),
}

export type TraceUrlState = SliceState<typeof traceSlice>
