import { describe, expect, it } from 'vitest'
import { collectivesCsv } from './CrossRank'
import type { CollectiveRow } from './api'

const row: CollectiveRow = {
  id: 3, group: 'default', name: 'nccl:all_reduce', collective: 'all_reduce', seq: 1, step: '10', ranks: 8, group_size: 8, complete: true,
  bytes: 448, dtype: null, last_arriver: '=rank5, "x"', skew_us: 582, transfer_us: 20, latency_us: 602, algbw_gbps: 0.022, busbw_gbps: 0.039,
}

describe('collectivesCsv', () => {
  it('writes a header and one line per row, escaping quotes, commas and formula-like cells', () => {
    const text = decodeURIComponent(collectivesCsv([row]).replace('data:text/csv;charset=utf-8,', ''))
    const lines = text.trimEnd().split('\n')
    expect(lines[0]).toBe('id,group,name,collective,seq,step,ranks,group_size,complete,bytes,dtype,last_arriver,skew_us,transfer_us,latency_us,algbw_gbps,busbw_gbps')
    expect(lines[1]).toBe(`3,default,nccl:all_reduce,all_reduce,1,10,8,8,true,448,,"'=rank5, ""x""",582,20,602,0.022,0.039`)
  })
})
