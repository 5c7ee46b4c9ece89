// API client of the GPU Idle view: `gpu_idle?run&worker&span` (analysis/gpu_idle/view.py). Times are
// trace us; every analysis carries its formula in `formulas`.
import { csvUrl, request, type Schemas, type Selection } from '../../api'

export type GpuIdlePayload = Schemas['GpuIdlePayload']
export type Histogram = Schemas['Histogram']
export type DeviceTime = Schemas['DeviceTime']
export type StreamIdle = Schemas['StreamIdle']
export type LaunchOutlier = Schemas['LaunchOutlier']
export type StreamQueue = Schemas['StreamQueue']
export type CriticalStep = Schemas['CriticalStep']
export type CriticalPath = Schemas['CriticalPath']
export type WhatIfPayload = Schemas['WhatIfPayload']

function params(s: Selection) {
  return { run: s.run, worker: s.worker, span: s.span }
}

export function fetchGpuIdle(selection: Selection, signal?: AbortSignal): Promise<GpuIdlePayload> {
  return request('gpu_idle', params(selection), signal)
}

export function gpuIdleCsvUrl(selection: Selection): string {
  return csvUrl('gpu_idle', params(selection))
}

/** `whatif?run&worker&span&edit`: predicted step times under `edit` (analysis/whatif). */
export function fetchWhatIf(selection: Selection, edit: string, signal?: AbortSignal): Promise<WhatIfPayload> {
  return request('whatif', { ...params(selection), edit }, signal)
}

export type WhatIfRunPayload = Schemas['WhatIfRunPayload']

/** Run-level edits (`rank:NAME`, `straggler`, `transfer`, analysis/whatif/ranks.py): every part
 * of `edit` names one of them. */
export function isRunEdit(edit: string): boolean {
  const parts = edit.split(';').filter((p) => p.trim())
  return parts.length > 0 && parts.every((p) => /^\s*(rank\s*:|straggler\s*=|transfer\s*=)/.test(p))
}

/** `whatif/run?run&span&edit`: predicted step times of every rank of the span under `edit`. */
export function fetchWhatIfRun(selection: Selection, edit: string, signal?: AbortSignal): Promise<WhatIfRunPayload> {
  return request('whatif/run', { run: selection.run, span: selection.span, edit }, signal)
}
