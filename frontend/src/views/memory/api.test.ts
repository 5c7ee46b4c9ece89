// The Memory view's links and queries through the typed client: its options are the contract's
// (views/memory/options.py), so a renamed option is a type error here, and the CSV links carry
// format=csv after the view's own options.
import { describe, expect, expectTypeOf, it } from 'vitest'
import { setBaseUrl, type QueryOf } from '../../api'
import { memoryCsvUrl, snapshotCsvUrl, type MemoryQuery, type SnapshotQuery } from './api'

const BASE = 'http://127.0.0.1:6006/data/plugin/torch_prof/'
const SEL = { run: 'r', worker: 'w', span: '1' }

describe('memory api', () => {
  it('links the CSV of a device and range, and of a snapshot', () => {
    setBaseUrl(BASE)
    expect(memoryCsvUrl(SEL, { device: 'GPU0', start_us: 5, end_us: 7.5 })).toBe(
      `${BASE}memory?run=r&worker=w&span=1&device=GPU0&start_us=5&end_us=7.5&format=csv`,
    )
    expect(memoryCsvUrl(SEL, {})).toBe(`${BASE}memory?run=r&worker=w&span=1&format=csv`)
    expect(snapshotCsvUrl({ run: 'r' }, { snapshot: 'a.pickle', at: 3 })).toBe(`${BASE}memory/snapshot?run=r&snapshot=a.pickle&at=3&format=csv`)
  })

  it('takes its queries from the contract', () => {
    expectTypeOf<MemoryQuery>().toEqualTypeOf<Pick<QueryOf<'memory'>, 'device' | 'start_us' | 'end_us'>>()
    expectTypeOf<MemoryQuery['start_us']>().toEqualTypeOf<number | undefined>()
    expectTypeOf<SnapshotQuery['snapshot']>().toEqualTypeOf<string | undefined>()
  })
})
