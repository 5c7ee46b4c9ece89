// The Operator view's efficiency sections: `compiled` (build_compiled: torch.compile regions ->
// Inductor kernels -> device time) and `roofline` (build_roofline: FLOPs, bytes, peaks, MFU).
import { request, type Schemas, type Selection } from '../../api'

export type Compiled = Schemas['CompiledPayload']
export type CompiledRegion = Schemas['CompiledRegion']
export type InductorKernel = Schemas['InductorKernel']
export type Roofline = Schemas['RooflinePayload']
export type RooflineRow = Schemas['RooflineRow']
export type RooflineDevice = Schemas['RooflineDevice']

export function fetchCompiled(sel: Selection, signal?: AbortSignal): Promise<Compiled> {
  return request('compiled', { ...sel }, signal)
}

export function fetchRoofline(sel: Selection, signal?: AbortSignal): Promise<Roofline> {
  return request('roofline', { ...sel }, signal)
}
