import { choice, text, type SliceState } from '../../urlSlice'

/** The Operator view's part of the URL. */
export const operatorSlice = {
  opGroup: choice('op_group', ['operator', 'operator_input_shape']),
  opSearch: text('op_q'),
  opTopN: text('op_top'), // every row unless the user asks for a top N
  opSort: text('op_sort'),
}

export type OperatorState = SliceState<typeof operatorSlice>
