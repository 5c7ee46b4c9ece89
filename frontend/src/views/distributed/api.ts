// API client of the Distributed view: `distributed?run&span` (build_distributed over all the
// workers of a span). Times are us, sizes bytes.
import { getJson, routeUrl } from '../../api'
import { list } from '../common/payload'

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
}

export async function fetchDistributed(run: string, span: string, signal?: AbortSignal): Promise<DistributedPayload> {
  const raw = await getJson<Record<string, unknown>>('distributed', { run, span }, signal)
  return {
    workers: list<string>(raw.workers).map(String),
    steps: list<string>(raw.steps).map(String),
    devices: list<DistributedDevice>(raw.devices),
    overlap: (raw.overlap ?? {}) as DistributedPayload['overlap'],
    wait: (raw.wait ?? {}) as DistributedPayload['wait'],
    comm_ops: (raw.comm_ops ?? {}) as DistributedPayload['comm_ops'],
    messages: list<string>(raw.messages).map(String),
  }
}

export function distributedCsvUrl(run: string, span: string): string {
  return routeUrl('distributed', { run, span, format: 'csv' })
}
