// The payloads of the shell and the Overview, Operator and Kernel views: aliases of the schemas
// in generated.ts (`npm run gen:types`, from tb_plugin/openapi.yaml, which the server's payload
// builders generate), so a payload change shows up here as a type error. The few types below
// that are not aliases are the UI's own (selection, chart input, group-by choices).
import type { components, paths } from './generated'

/** Every schema of tb_plugin/openapi.yaml by name (views/<name>/api.ts alias theirs from it). */
export type Schemas = components['schemas']

export type RunsResponse = Schemas['RunListing']
export type RunInfo = Schemas['Run']
export type WorkerStatus = Schemas['WorkerListing']
export type SpanStatus = Schemas['SpanStatus']
/** One entry of the server's view registry (`/viewspecs`). */
export type ViewSpec = Schemas['ViewSpecEntry']
export type ViewSpecs = Schemas['ViewSpecs']

export type Overview = Schemas['OverviewPayload']
export type Category = Overview['categories'][number]
export type GpuInfo = Schemas['OverviewGpu']
export type Recommendation = Schemas['Recommendation']
export type RunAdvice = Schemas['RunAdvicePayload']
export type StepVariance = Schemas['StepVariance']
export type SlowStep = Schemas['SlowStep']

export type OperatorTable = Schemas['OperatorsPayload']
export type OperatorRow = Schemas['OperatorRow']
export type CallStackRow = Schemas['CallStackRow']
export type CallStacks = Schemas['CallStacksPayload']
export type OperatorPies = Schemas['OperatorPiesPayload']
export type KernelTable = Schemas['KernelsPayload']
export type KernelRow = Schemas['KernelRow']
export type KernelPies = Schemas['KernelPiesPayload']

export type Slice = Schemas['PieSlice']
/** A pie as the server sends it: slices sorted by value (descending), or null when empty. */
export type Slices = Slice[] | null

// UI-side types (not payloads).

/** The Operator and Kernel views' `group_by` choices, as the server declares them. */
export type OperatorGroupBy = NonNullable<paths['/operators']['get']['parameters']['query']['group_by']>
export type KernelGroupBy = NonNullable<paths['/kernels']['get']['parameters']['query']['group_by']>

/** One donut as the charts draw it: the slices with an arc (value > 0) and their sum. */
export interface Pie {
  slices: Slice[]
  other: number
  total: number
}

export interface Selection {
  run: string
  worker: string
  span: string
}

export type CaptureTargets = Schemas['CaptureTargets']
export type CaptureForm = Schemas['CaptureForm']
export type CaptureAccepted = Schemas['CaptureAccepted']
export type CaptureProgress = Schemas['CaptureProgress']
