import { text, type SliceState } from '../../urlSlice'

/** The Trace view's part of the URL: the step whose critical path is highlighted ('' none). */
export const traceSlice = {
  tCrit: text('t_crit'),
}

export type TraceState = SliceState<typeof traceSlice>
