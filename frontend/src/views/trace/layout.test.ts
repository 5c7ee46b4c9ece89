import { describe, expect, it } from 'vitest'
import type { TrackInfo } from './api'
import { COUNTERS_GROUP, computeLayout, firstVisible, itemAt, rowScrollTop } from './layout'
import { NO_ARRANGEMENT } from './trackList'

const track = (id: number, kind: 'cpu' | 'gpu', process: string, depth: number, events: number): TrackInfo => ({ id, pid: process, tid: String(id), kind, process, thread: `t${id}`, depth, event_count: events })

// Two CPU threads (3 rows, 1 row) in process "python", one GPU stream (2 rows), one counter.
const tracks = [track(1, 'cpu', 'python', 3, 100), track(2, 'cpu', 'python', 1, 1), track(3, 'gpu', 'GPU 0', 2, 5)]
const counters = [{ name: 'mem', unit: 'bytes', kind: 'memory_allocated' }]

describe('computeLayout', () => {
  // Heights: group header 24, counter 36, track = rows x 18 + 2 x 3 padding.
  const layout = computeLayout(tracks, counters)

  it('stacks the counters group, then one group per process in track order', () => {
    const rows = layout.items.map((it) => [it.type, it.y, it.h])
    expect(rows).toEqual([
      ['group', 0, 24], // Counters
      ['counter', 24, 36],
      ['group', 60, 24], // python
      ['track', 84, 60], // 3 rows
      ['track', 144, 24], // 1 row
      ['group', 168, 24], // GPU 0
      ['track', 192, 42], // 2 rows
    ])
    expect(layout.height).toBe(234)
  })

  it('places each track\'s first row below its padding', () => {
    expect(layout.trackY.get(1)).toEqual({ y: 87, collapsed: false, group: 'cpu:python' })
    expect(layout.trackY.get(3)?.y).toBe(195)
    expect(layout.groupOf.get(2)).toBe('cpu:python')
  })

  it('describes groups with plural-aware counts', () => {
    const [counterGroup, , python, , , gpu] = layout.items
    expect(counterGroup.type === 'group' && counterGroup.detail).toBe('1 series')
    expect(python.type === 'group' && python.detail).toBe('2 threads · 101 events')
    expect(gpu.type === 'group' && gpu.detail).toBe('1 stream · 5 events')
  })

  it('collapses a process to its header; its tracks point at the header', () => {
    const c = computeLayout(tracks, counters, { ...NO_ARRANGEMENT, collapsed: ['cpu:python', COUNTERS_GROUP] })
    expect(c.items.map((it) => [it.type, it.y])).toEqual([
      ['group', 0],
      ['group', 24],
      ['group', 48],
      ['track', 72],
    ])
    expect(c.trackY.get(2)).toEqual({ y: 24, collapsed: true, group: 'cpu:python' })
    expect(c.height).toBe(114) // 3 x 24 + 42
  })
})

describe('lookups', () => {
  const layout = computeLayout(tracks, counters)

  it('itemAt finds the item containing a content y', () => {
    expect(itemAt(layout, 0)?.type).toBe('group')
    expect(itemAt(layout, 100)).toMatchObject({ type: 'track', y: 84 })
    expect(itemAt(layout, 143.9)).toMatchObject({ type: 'track', y: 84 })
    expect(itemAt(layout, 144)).toMatchObject({ type: 'track', y: 144 })
    expect(itemAt(layout, 234)).toBeNull()
    expect(itemAt(layout, -1)).toBeNull()
  })

  it('firstVisible is the first item whose bottom is below y', () => {
    expect(firstVisible(layout, 0)).toBe(0)
    expect(firstVisible(layout, 83)).toBe(2)
    expect(firstVisible(layout, 84)).toBe(3) // the python header ends at 84
    expect(firstVisible(layout, 1000)).toBe(layout.items.length)
  })

  it('rowScrollTop scrolls a hidden row a third of the way down, else nothing', () => {
    // Track 1, depth 2: row top 87 + 2 x 18 = 123, bottom 141.
    expect(rowScrollTop(layout, 1, 2, 0, 120)).toBe(83) // 141 > 0 + 120 - 4: 123 - 40
    expect(rowScrollTop(layout, 1, 2, 100, 120)).toBeNull() // 123..141 inside 104..216
    expect(rowScrollTop(layout, 1, 0, 200, 120)).toBe(47) // 87 < 204: max(0, 87 - 40)
    expect(rowScrollTop(layout, 1, 0, 0, 30)).toBe(77) // 87 + 18 > 26: 87 - 10
    expect(rowScrollTop(layout, 99, 0, 0, 120)).toBeNull()
  })
})
