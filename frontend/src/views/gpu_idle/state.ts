import { text, type SliceState } from '../../urlSlice'

/** The GPU Idle view's part of the URL: the what-if edit last asked for (`wi_edit`, '' none),
 * e.g. `launch=0` from a recommendation's "What if" button. */
export const gpuIdleSlice = {
  wiEdit: text('wi_edit'),
}

export type GpuIdleState = SliceState<typeof gpuIdleSlice>
