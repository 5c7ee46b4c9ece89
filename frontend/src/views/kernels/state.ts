import { choice, text, type SliceState } from '../../urlSlice'

/** The Kernel view's part of the URL. */
export const kernelSlice = {
  kGroup: choice('k_group', ['kernel', 'kernel_op_launch']),
  kSearch: text('k_q'),
  kOpSearch: text('k_op_q'),
  kTopN: text('k_top'), // every row unless the user asks for a top N
  kSort: text('k_sort'),
}

export type KernelState = SliceState<typeof kernelSlice>
