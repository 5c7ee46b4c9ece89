// API client of the Inference view: `inference?run&worker&span` (analysis/inference/view.py).
// Times are trace us, sizes bytes; every number's rule is in `formulas`.
import { csvUrl, request, type Schemas, type Selection } from '../../api'

export type InferencePayload = Schemas['InferencePayload']
export type StepRow = Schemas['StepRow']
export type PhaseRow = Schemas['PhaseRow']

function params(s: Selection) {
  return { run: s.run, worker: s.worker, span: s.span }
}

export function fetchInference(selection: Selection, signal?: AbortSignal): Promise<InferencePayload> {
  return request('inference', params(selection), signal)
}

export function inferenceCsvUrl(selection: Selection): string {
  return csvUrl('inference', params(selection))
}
