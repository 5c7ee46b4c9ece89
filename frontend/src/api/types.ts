// The payloads of the shell and the wave-1 views exactly as the server sends them (the contract is
// tb_plugin/openapi.yaml; `npm run gen:types` writes generated.ts from it, and these hand-written
// types give way to generated ones as the spec gains schemas for each view).

export type RunState = 'loading' | 'ready' | 'partial' | 'error'
export type SpanState = 'queued' | 'loading' | 'ok' | 'partial' | 'truncated' | 'error'

export interface SpanStatus {
  span: string
  state: SpanState
  messages: string[]
  events: number | null
}

export interface WorkerStatus {
  name: string
  spans: SpanStatus[]
}

export interface RunInfo {
  name: string
  state: RunState
  progress: number
  views: string[]
  workers: WorkerStatus[]
}

export interface RunsResponse {
  runs: RunInfo[]
  loading: boolean
  logdir: string
}

export type Breakdown = Record<string, number>

export interface StepBreakdown {
  name: string
  total_us: number
  breakdown_us: Breakdown
}

export interface GpuInfo {
  id: number | string
  name?: string | null
  memory_gb?: number | null
  compute_capability?: string | null
  utilization_pct?: number | null
  sm_efficiency_pct?: number | null
  achieved_occupancy_pct?: number | null
  tensor_core_pct?: number | null
}

export type Severity = 'high' | 'medium' | 'low'

export interface Recommendation {
  id?: string
  severity: Severity
  title: string
  text: string
  view?: string | null
  /** The number the statement rests on, in `unit`. */
  metric?: number | string | null
  unit?: string | null
  link?: string | null
  links?: { label: string; url: string }[]
}

export interface Overview {
  steps: StepBreakdown[]
  average: { total_us: number; breakdown_us: Breakdown }
  categories: string[]
  gpus: GpuInfo[]
  recommendations: Recommendation[]
  environment: { device_type?: string; [key: string]: unknown }
  /** Human-readable caveats (fallback step, trimmed steps...). */
  notes: string[]
}

export type OperatorGroupBy = 'operator' | 'operator_input_shape'
export type KernelGroupBy = 'kernel' | 'kernel_op_launch'

export interface OperatorRow {
  name: string
  input_shape?: string
  calls: number
  host_self_us: number
  host_total_us: number
  device_self_us?: number | null
  device_total_us?: number | null
  tc_eligible?: boolean | string | null
  tc_self_pct?: number | null
  tc_total_pct?: number | null
  has_call_stack?: boolean
  call_stack?: string
}

export interface OperatorTable {
  rows: OperatorRow[]
  sort_by: 'device_self_us' | 'host_self_us'
  has_device: boolean
}

export interface Slice {
  name: string
  value: number
}

/** A pie as the server sends it: slices sorted by value (descending), or null when empty. */
export type Slices = Slice[] | null

export interface OperatorPies {
  device_self: Slices
  device_total: Slices
  host_self: Slices
  host_total: Slices
}

/** One donut as the charts draw it: the slices with an arc (value > 0) and their sum. */
export interface Pie {
  slices: Slice[]
  other: number
  total: number
}

export interface KernelRow {
  name: string
  calls: number
  total_us: number
  mean_us: number
  max_us: number
  min_us: number
  blocks_per_sm?: number | null
  occupancy_pct?: number | null
  tensor_cores?: boolean | string | null
  operator?: string
  grid?: string
  block?: string
  registers_per_thread?: number | string | null
  shared_memory?: number | string | null
  op_tc_eligible?: boolean | string | null
}

export interface KernelTable {
  rows: KernelRow[]
}

export interface KernelPies {
  /** The top-N kernels by total time. */
  total: Slice[]
  /** Shares (0..1) of kernel time on and off Tensor Cores; null when the span has no kernel. */
  tensor_cores: { using: number; not_using: number } | null
}

/** One entry of the server's view registry (`/viewspecs`). */
export interface ViewSpec {
  name: string
  order: number
  /** Offered per run (availability over all its workers) rather than per worker file. */
  run_level: boolean
}

export interface Selection {
  run: string
  worker: string
  span: string
}
