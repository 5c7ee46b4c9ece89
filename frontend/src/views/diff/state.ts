import { choice, text, type SliceState } from '../../urlSlice'

/** The Diff view's part of the URL: the experiment side (the baseline is the selection), the
 * drill-down path, and how every number of the page is shown: one basis (per step or whole
 * span), host or device time (`auto`: device time when either side ran any), the lower table. */
export const diffSlice = {
  expRun: text('exp_run'),
  expWorker: text('exp_worker'),
  expSpan: text('exp_span'),
  diffPath: text('diff_path'),
  diffBasis: choice('diff_basis', ['per_step', 'total']),
  diffTime: choice('diff_time', ['auto', 'device', 'host']),
  diffTable: choice('diff_table', ['operators', 'kernels']),
}

export type DiffState = SliceState<typeof diffSlice>
