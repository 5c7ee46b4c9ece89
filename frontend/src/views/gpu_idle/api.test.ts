import { describe, expect, it } from 'vitest'
import { isRunEdit } from './api'

describe('run-level what-if edits', () => {
  it('are the edits across ranks, every part of them', () => {
    expect(isRunEdit('rank:worker7=0')).toBe(true)
    expect(isRunEdit('straggler=0; transfer=0')).toBe(true)
    expect(isRunEdit(' straggler = 0 ')).toBe(true)
  })

  it('leave per-worker edits and mixtures to the per-worker replay', () => {
    expect(isRunEdit('launch=0')).toBe(false)
    expect(isRunEdit('op:rank_fn=0')).toBe(false)
    expect(isRunEdit('straggler=0; launch=0')).toBe(false)
    expect(isRunEdit('')).toBe(false)
  })
})
