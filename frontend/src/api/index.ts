import { getJson as getHttpJson, routeUrl, type Params } from './http'

// Typed client for the torch-prof HTTP API (tb_plugin/server, contract in tb_plugin/openapi.yaml).
//
// Every route is resolved relative to the plugin's base URL, which is the folder of the ES module
// TensorBoard loaded (`<prefix>/data/plugin/torch_prof/`), so `--path_prefix` works and no
// absolute URL is ever built. Payload shapes that are still moving on the server side are
// normalised here, so the views only ever see the types below.

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

export const BREAKDOWN_CATEGORIES = [
  'Kernel',
  'Memcpy',
  'Memset',
  'Communication',
  'Runtime',
  'DataLoader',
  'CPU Exec',
  'Other',
] as const

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

/** One donut: slices sorted by value (descending); `other` is what the top-N left out. */
export interface Pie {
  slices: Slice[]
  other: number
  total: number
}

export interface OperatorPies {
  device_self: Pie | null
  device_total: Pie | null
  host_self: Pie | null
  host_total: Pie | null
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
  kernels: Pie | null
  /** Share of kernel time on Tensor Cores, 0..1; null when unknown. */
  tensor_core_ratio: number | null
}

export interface Selection {
  run: string
  worker: string
  span: string
}

// ---------------------------------------------------------------------------------------------
// HTTP (one path for every request: ./http.ts)

export { ApiError, LoadingError, routeUrl, setBaseUrl, type Params } from './http'

function asStrings(value: unknown): string[] {
  if (Array.isArray(value)) return value.map((v) => String(v))
  if (typeof value === 'string' && value) return [value]
  return []
}

/** A route's JSON; a 202 throws LoadingError so the caller (TanStack Query) schedules the retry. */
export function getJson<T>(route: string, params: Params = {}, signal?: AbortSignal): Promise<T> {
  return getHttpJson<T>(routeUrl(route, params), { signal, retry202: false })
}

// ---------------------------------------------------------------------------------------------
// Normalisers (tolerant of the payload variants the server might send)

function num(value: unknown, fallback = 0): number {
  const n = typeof value === 'number' ? value : typeof value === 'string' ? Number(value) : NaN
  return Number.isFinite(n) ? n : fallback
}

function optNum(value: unknown): number | null {
  if (value === null || value === undefined || value === '') return null
  const n = num(value, NaN)
  return Number.isFinite(n) ? n : null
}

/**
 * Accepts the pie shapes seen so far:
 *  - `[{name, value}]` or `[[name, value]]`
 *  - `{slices|items|rows|data: ..., other?, total?}`
 *  - the reference's `{columns, rows: [[name, value]]}`
 *  - a `{name: value}` map
 */
export function toPie(raw: unknown): Pie | null {
  if (raw === null || raw === undefined) return null
  let items: unknown = raw
  let other: number | null = null
  let total: number | null = null
  if (!Array.isArray(raw) && typeof raw === 'object') {
    const obj = raw as Record<string, unknown>
    const list = obj.slices ?? obj.items ?? obj.rows ?? obj.data ?? obj.top
    if (Array.isArray(list)) {
      items = list
      other = optNum(obj.other ?? obj.other_us ?? obj.rest)
      total = optNum(obj.total ?? obj.total_us)
    } else {
      items = Object.entries(obj).map(([name, value]) => ({ name, value }))
    }
  }
  if (!Array.isArray(items)) return null
  const slices: Slice[] = []
  for (const item of items) {
    if (Array.isArray(item)) {
      slices.push({ name: String(item[0]), value: num(item[1]) })
    } else if (item && typeof item === 'object') {
      const o = item as Record<string, unknown>
      const value = o.value ?? o.us ?? o.value_us ?? o.total_us ?? o.time_us ?? o.self_us
      slices.push({ name: String(o.name ?? o.label ?? ''), value: num(value) })
    }
  }
  const kept = slices.filter((s) => s.value > 0)
  const sum = kept.reduce((acc, s) => acc + s.value, 0)
  const rest = other ?? (total !== null ? Math.max(0, total - sum) : 0)
  if (kept.length === 0 && rest <= 0) return null
  return { slices: kept, other: rest, total: total ?? sum + rest }
}

function pick(obj: Record<string, unknown>, ...keys: string[]): unknown {
  for (const key of keys) if (key in obj) return obj[key]
  return undefined
}

export function toOperatorPies(raw: unknown): OperatorPies {
  const obj = (raw && typeof raw === 'object' ? raw : {}) as Record<string, unknown>
  const inner = (obj.pies && typeof obj.pies === 'object' ? obj.pies : obj) as Record<string, unknown>
  return {
    device_self: toPie(pick(inner, 'device_self', 'device_self_us', 'device_self_time', 'device_self_duration')),
    device_total: toPie(pick(inner, 'device_total', 'device_total_us', 'device_total_time', 'device_total_duration')),
    host_self: toPie(pick(inner, 'host_self', 'host_self_us', 'host_self_time', 'host_self_duration')),
    host_total: toPie(pick(inner, 'host_total', 'host_total_us', 'host_total_time', 'host_total_duration')),
  }
}

export function toKernelPies(raw: unknown): KernelPies {
  const obj = (raw && typeof raw === 'object' ? raw : {}) as Record<string, unknown>
  const kernels = toPie(pick(obj, 'kernels', 'top', 'total', 'kernel', 'top_kernels'))
  let ratio: number | null = null
  const tc = pick(obj, 'tensor_core_ratio', 'tensor_cores', 'tc', 'tc_pie', 'tensor_core', 'tensor_core_pct')
  if (typeof tc === 'number') {
    ratio = tc > 1 ? tc / 100 : tc
  } else if (tc && typeof tc === 'object') {
    const o = tc as Record<string, unknown>
    const r = optNum(pick(o, 'ratio', 'fraction', 'share'))
    const pct = optNum(pick(o, 'pct', 'percent', 'using_pct'))
    if (r !== null) ratio = r
    else if (pct !== null) ratio = pct / 100
    else {
      const used = optNum(pick(o, 'using_us', 'tc_us', 'used_us', 'using', 'Using Tensor Cores'))
      const unused = optNum(pick(o, 'not_using_us', 'non_tc_us', 'unused_us', 'not_using', 'Not Using Tensor Cores'))
      const total = optNum(pick(o, 'total_us', 'total'))
      if (used !== null && (unused !== null || total !== null)) {
        const denom = total ?? used + (unused ?? 0)
        ratio = denom > 0 ? used / denom : 0
      } else {
        const pie = toPie(tc)
        if (pie && pie.total > 0) {
          const using = pie.slices.find((s) => /^using|^tensor|^tc\b|yes/i.test(s.name) && !/not|non/i.test(s.name))
          ratio = using ? using.value / pie.total : 0
        }
      }
    }
  }
  return { kernels, tensor_core_ratio: ratio }
}

function toRunInfo(raw: unknown): RunInfo {
  if (typeof raw === 'string') return { name: raw, state: 'ready', progress: 1, views: [], workers: [] }
  const o = (raw ?? {}) as Record<string, unknown>
  const workers = Array.isArray(o.workers) ? o.workers : []
  return {
    name: String(o.name ?? ''),
    state: (typeof o.state === 'string' ? o.state : 'ready') as RunState,
    progress: Math.min(1, Math.max(0, num(o.progress, o.state === 'loading' ? 0 : 1))),
    views: asStrings(o.views),
    workers: workers.map((w) => {
      const wo = (typeof w === 'string' ? { name: w } : (w ?? {})) as Record<string, unknown>
      const spans = Array.isArray(wo.spans) ? wo.spans : []
      return {
        name: String(wo.name ?? ''),
        spans: spans.map((s) => {
          const so = (typeof s === 'string' ? { span: s, state: 'ok' } : (s ?? {})) as Record<string, unknown>
          return {
            span: String(so.span ?? so.name ?? ''),
            state: (typeof so.state === 'string' ? so.state : 'ok') as SpanState,
            messages: asStrings(so.messages),
            events: optNum(so.events),
          }
        }),
      }
    }),
  }
}

// ---------------------------------------------------------------------------------------------
// Routes

export const api = {
  async runs(signal?: AbortSignal): Promise<RunsResponse> {
    const raw = await getJson<Record<string, unknown>>('runs', {}, signal)
    const runs = Array.isArray(raw.runs) ? raw.runs.map(toRunInfo) : []
    return { runs, loading: Boolean(raw.loading), logdir: String(raw.logdir ?? '') }
  },

  views(run: string, signal?: AbortSignal): Promise<string[]> {
    return getJson<unknown>('views', { run }, signal).then(asStrings)
  },

  workers(run: string, view: string, signal?: AbortSignal): Promise<string[]> {
    return getJson<unknown>('workers', { run, view }, signal).then(asStrings)
  },

  spans(run: string, worker: string, signal?: AbortSignal): Promise<string[]> {
    return getJson<unknown>('spans', { run, worker }, signal).then(asStrings)
  },

  async overview(sel: Selection, signal?: AbortSignal): Promise<Overview> {
    const raw = await getJson<Record<string, unknown>>('overview', { ...sel }, signal)
    const average = (raw.average ?? {}) as Overview['average']
    return {
      steps: Array.isArray(raw.steps) ? (raw.steps as StepBreakdown[]) : [],
      average: { total_us: num(average.total_us), breakdown_us: average.breakdown_us ?? {} },
      categories: asStrings(raw.categories),
      gpus: Array.isArray(raw.gpus) ? (raw.gpus as GpuInfo[]) : [],
      recommendations: Array.isArray(raw.recommendations) ? (raw.recommendations as Recommendation[]) : [],
      environment: (raw.environment ?? {}) as Overview['environment'],
      notes: asStrings(raw.notes),
    }
  },

  async operators(sel: Selection, groupBy: OperatorGroupBy, signal?: AbortSignal): Promise<OperatorTable> {
    const raw = await getJson<Record<string, unknown>>('operators', { ...sel, group_by: groupBy }, signal)
    const rows = Array.isArray(raw.rows) ? (raw.rows as OperatorRow[]) : []
    const hasDevice = typeof raw.has_device === 'boolean' ? raw.has_device : rows.some((r) => r.device_self_us != null)
    const sortBy = raw.sort_by === 'host_self_us' || raw.sort_by === 'device_self_us' ? raw.sort_by : hasDevice ? 'device_self_us' : 'host_self_us'
    return { rows, has_device: hasDevice, sort_by: sortBy }
  },

  async operatorPies(sel: Selection, groupBy: OperatorGroupBy, topN: number | null, signal?: AbortSignal): Promise<OperatorPies> {
    const raw = await getJson<unknown>('operators/pies', { ...sel, group_by: groupBy, top_n: topN ?? undefined }, signal)
    return toOperatorPies(raw)
  },

  async operatorStacks(
    sel: Selection,
    groupBy: OperatorGroupBy,
    name: string,
    inputShape: string | undefined,
    signal?: AbortSignal,
  ): Promise<OperatorRow[]> {
    const raw = await getJson<unknown>(
      'operators/stack',
      { ...sel, group_by: groupBy, name, input_shape: groupBy === 'operator_input_shape' ? (inputShape ?? '') : undefined },
      signal,
    )
    const rows = Array.isArray(raw) ? raw : (raw as { rows?: unknown }).rows
    return Array.isArray(rows) ? (rows as OperatorRow[]) : []
  },

  async kernels(sel: Selection, groupBy: KernelGroupBy, signal?: AbortSignal): Promise<KernelTable> {
    const raw = await getJson<Record<string, unknown>>('kernels', { ...sel, group_by: groupBy }, signal)
    return { rows: Array.isArray(raw.rows) ? (raw.rows as KernelRow[]) : [] }
  },

  async kernelPies(sel: Selection, topN: number | null, signal?: AbortSignal): Promise<KernelPies> {
    const raw = await getJson<unknown>('kernels/pies', { ...sel, top_n: topN ?? undefined }, signal)
    return toKernelPies(raw)
  },

  operatorsCsvUrl(sel: Selection, groupBy: OperatorGroupBy): string {
    return routeUrl('operators', { ...sel, group_by: groupBy, format: 'csv' })
  },

  kernelsCsvUrl(sel: Selection, groupBy: KernelGroupBy): string {
    return routeUrl('kernels', { ...sel, group_by: groupBy, format: 'csv' })
  },
}
