import { describe, expect, it } from 'vitest'
import type { Recommendation } from '../api/types'
import { parseWindow } from '../views/trace/state'
import { evidenceText, evidenceWindow, savingText } from './advice'

const base: Recommendation = {
  id: 'host_bound', severity: 'high', title: 't', text: 'x', view: 'GPU Idle', metric: 1, unit: '%',
  start_us: 1_694_128_201_430_000, end_us: 1_694_128_201_442_300, link: null, links: [],
  saving_us: 4500, saving_pct: 90, evidence_step: '5', evidence_offset_us: 3200,
}

describe('recommendation words', () => {
  it('prices the advice per step, and says nothing for unpriced advice', () => {
    expect(savingText(base)).toBe('saves up to 4.50 ms per step (90.0 %)')
    expect(savingText({ ...base, saving_us: null, saving_pct: null })).toBeNull()
  })

  it('places the evidence in its step, never at an epoch time', () => {
    expect(evidenceText(base)).toBe('a 12.30 ms range, 3.20 ms into step 5')
    expect(evidenceText({ ...base, evidence_step: null, evidence_offset_us: null })).toBe('a 12.30 ms range')
    expect(evidenceText({ ...base, start_us: null, end_us: null })).toBeNull()
  })

  it('opens the Trace view on exactly the evidence range', () => {
    expect(parseWindow(evidenceWindow(base) ?? '')).toEqual([base.start_us, base.end_us])
    expect(evidenceWindow({ ...base, end_us: base.start_us })).toBeNull()
    expect(parseWindow('5,5')).toBeNull()
    expect(parseWindow('a,b')).toBeNull()
    expect(parseWindow('1,2,3')).toBeNull()
  })
})
