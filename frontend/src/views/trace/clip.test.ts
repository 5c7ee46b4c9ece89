import { describe, expect, it } from 'vitest'
import { exitPoint } from './clip'

const r = { left: 100, top: 40, right: 500, bottom: 300 }

describe('exitPoint', () => {
  it('meets the edge the segment leaves by (hand-derived points)', () => {
    expect(exitPoint(r, 300, 100, 700, 100)).toEqual([500, 100]) // right edge, flat
    expect(exitPoint(r, 300, 100, -100, 100)).toEqual([100, 100]) // left edge
    // towards (0, 0): x reaches 100 at t = 2/3 (y = 33.3, above the top), y reaches 40 at t = 0.6
    expect(exitPoint(r, 300, 100, 0, 0)).toEqual([120, 40])
    expect(exitPoint(r, 200, 200, 200, 900)).toEqual([200, 300]) // bottom edge, vertical
  })

  it('is null unless exactly the first end is on screen', () => {
    expect(exitPoint(r, 300, 100, 400, 200)).toBeNull() // both inside
    expect(exitPoint(r, 0, 0, 300, 100)).toBeNull() // first outside
  })
})
