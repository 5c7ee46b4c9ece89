// API client of the Distributed view: `distributed?run&span` (build_distributed over all the
// workers of a span). Times are us, sizes bytes.
import { csvUrl, request, type Schemas } from '../../api'

export type DistributedPayload = Schemas['DistributedPayload']
export type DistributedDevice = Schemas['DistributedDevice']
export type CommOpRow = Schemas['CommOpRow']
export type CollectiveRow = Schemas['CollectiveRow']
export type StragglerRow = Schemas['StragglerRow']
export type BandwidthRow = Schemas['BandwidthRow']
export type GroupRow = Schemas['GroupRow']

export function fetchDistributed(run: string, span: string, signal?: AbortSignal): Promise<DistributedPayload> {
  return request('distributed', { run, span }, signal)
}

export function distributedCsvUrl(run: string, span: string): string {
  return csvUrl('distributed', { run, span })
}
