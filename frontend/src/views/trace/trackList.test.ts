import { describe, expect, it } from 'vitest'
import type { TrackInfo } from './api'
import { PINNED_GROUP, computeLayout } from './layout'
import { NO_ARRANGEMENT, formatTrackList, moveGroup, orderGroups, parseTrackList, toggleCollapsed, toggleHidden, togglePin } from './trackList'

const track = (id: number, kind: 'cpu' | 'gpu' | 'other', process: string, depth: number, events: number, thread = `t${id}`): TrackInfo => ({ id, pid: process, tid: String(id), kind, process, thread, depth, event_count: events })

// python: threads 1 (2 rows), 2 (1 row); GPU 0: stream 3 (1 row); 4: no events; 5: the
// "(no pid)" lane (no pid, no tid) of the global Record Window End instant, as the server sends it.
const tracks = [
  track(1, 'cpu', 'python', 2, 10),
  track(2, 'cpu', 'python', 1, 4),
  track(3, 'gpu', 'GPU 0', 1, 7),
  track(4, 'other', 'Spans', 0, 0),
  { id: 5, pid: '', tid: '', kind: 'other' as const, process: '(no pid)', thread: '', depth: 1, event_count: 1 },
]
const shape = (l: ReturnType<typeof computeLayout>) => l.items.map((it) => (it.type === 'group' ? `[${it.label}]` : it.type === 'track' ? it.track.id : it.name))

describe('track list state', () => {
  it('round-trips through the URL fields, process names with commas included', () => {
    const list = { pinned: [3, 1], hidden: [2], order: ['gpu:GPU 0', 'cpu:a,b'], collapsed: ['counters'] }
    const url = formatTrackList(list)
    expect(url).toEqual({ trPin: '3,1', trHide: '2', trOrder: 'gpu%3AGPU%200,cpu%3Aa%2Cb', trFold: 'counters' })
    expect(parseTrackList(url)).toEqual(list)
    expect(formatTrackList(NO_ARRANGEMENT)).toEqual({ trPin: '', trHide: '', trOrder: '', trFold: '' })
  })

  it('drops malformed items of a mangled link and keeps the rest', () => {
    expect(parseTrackList({ trPin: '1,x,,1,7', trHide: '-3,4', trOrder: '%E0%A4%A,cpu%3Ap', trFold: '' })).toEqual({ pinned: [1, 7], hidden: [4], order: ['cpu:p'], collapsed: [] })
  })

  it('pinning unhides and hiding unpins; toggles undo', () => {
    const hidden = toggleHidden(NO_ARRANGEMENT, 2)
    expect(hidden.hidden).toEqual([2])
    const pinned = togglePin(hidden, 2)
    expect(pinned).toMatchObject({ pinned: [2], hidden: [] })
    expect(toggleHidden(pinned, 2)).toMatchObject({ pinned: [], hidden: [2] })
    expect(togglePin(togglePin(NO_ARRANGEMENT, 5), 5).pinned).toEqual([])
    expect(toggleCollapsed(toggleCollapsed(NO_ARRANGEMENT, 'g'), 'g').collapsed).toEqual([])
  })

  it('orders groups: named first (unknown names ignored), the rest in server order', () => {
    expect(orderGroups(['a', 'b', 'c'], ['c', 'zz'])).toEqual(['c', 'a', 'b'])
    const moved = moveGroup(NO_ARRANGEMENT, ['a', 'b', 'c'], 'c', -1)
    expect(moved.order).toEqual(['a', 'c', 'b'])
    expect(moveGroup(moved, ['a', 'b', 'c'], 'a', -1)).toBe(moved) // already first
    expect(moveGroup(moved, ['a', 'b', 'c'], 'b', 1)).toBe(moved) // already last
  })
})

describe('layout of an arranged track list', () => {
  it('leaves out empty tracks (the "(no pid)" lane) by default', () => {
    const l = computeLayout(tracks, [])
    expect(shape(l)).toEqual(['[python]', 1, 2, '[GPU 0]', 3])
    expect(l.trackY.has(4)).toBe(false)
    expect(l.trackY.has(5)).toBe(false)
    expect(l.height).toBe(2 * 24 + (2 * 18 + 6) + (18 + 6) + (18 + 6))
  })

  it('pins, hides, reorders and collapses', () => {
    let list = togglePin(NO_ARRANGEMENT, 3)
    list = toggleHidden(list, 2)
    list = moveGroup(list, ['cpu:python', 'gpu:GPU 0'], 'gpu:GPU 0', -1)
    const l = computeLayout(tracks, [], list)
    // GPU 0 lost its only stream to the pinned group; python shows its hidden count.
    expect(shape(l)).toEqual(['[Pinned]', 3, '[GPU 0]', '[python]', 1])
    const python = l.items.find((it) => it.type === 'group' && it.key === 'cpu:python')
    expect(python).toMatchObject({ detail: '1 thread · 10 events · 1 hidden', hiddenIds: [2], trackIds: [1] })
    expect(l.groupOf.get(3)).toBe(PINNED_GROUP)
    expect(l.trackY.get(2)).toBeUndefined()
    const folded = computeLayout(tracks, [], toggleCollapsed(list, PINNED_GROUP))
    expect(shape(folded)).toEqual(['[Pinned]', '[GPU 0]', '[python]', 1])
    expect(folded.trackY.get(3)).toEqual({ y: 0, collapsed: true, group: PINNED_GROUP })
  })
})
