import { text, type SliceState } from '../../urlSlice'

/** The Diff view's part of the URL: the experiment side (the baseline is the selection) and the drill-down path. */
export const diffSlice = {
  expRun: text('exp_run'),
  expWorker: text('exp_worker'),
  expSpan: text('exp_span'),
  diffPath: text('diff_path'),
}

export type DiffState = SliceState<typeof diffSlice>
