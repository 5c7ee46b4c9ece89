// API client of the Distributed view: `distributed?run&span` (build_distributed over all the
// workers of a span). Times are us, sizes bytes.
import { getJson, routeUrl } from '../../api'

export interface DistributedGpu {
  id: number
  name: string | null
  memory_bytes: number | null
  compute_capability: string | null
}

export interface DistributedDevice {
  worker: string
  node: string
  pid: string
  backend: string | null
  rank: number | null
  world_size: number | null
  gpus: DistributedGpu[]
}

export interface OverlapValues {
  computation: number
  overlap: number
  communication: number
  other: number
}

export interface WaitValues {
  transfer: number
  synchronizing: number
}

export interface CommOpRow {
  name: string
  calls: number
  total_bytes: number
  avg_bytes: number
  total_latency_us: number
  avg_latency_us: number
  total_transfer_us: number
  avg_transfer_us: number
}

export interface DistributedPayload {
  workers: string[]
  steps: string[]
  devices: DistributedDevice[]
  /** "all" (mean over steps) and each step -> worker -> values */
  overlap: Record<string, Record<string, OverlapValues>>
  wait: Record<string, Record<string, WaitValues>>
  comm_ops: Record<string, { rows: CommOpRow[] }>
  messages: string[]
  /** Workers left out of the view (broken, or without the span) and why. */
  skipped: Record<string, string>
}

export function fetchDistributed(run: string, span: string, signal?: AbortSignal): Promise<DistributedPayload> {
  return getJson<DistributedPayload>('distributed', { run, span }, signal)
}

export function distributedCsvUrl(run: string, span: string): string {
  return routeUrl('distributed', { run, span, format: 'csv' })
}
