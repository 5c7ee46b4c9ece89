import { text, type SliceState } from '../../urlSlice'

/** The Memory view's part of the URL: the device shown ('' = the default device). */
export const memorySlice = {
  memDevice: text('mem_device'),
}

export type MemoryState = SliceState<typeof memorySlice>
