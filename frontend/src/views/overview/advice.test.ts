import { describe, expect, it } from 'vitest'
import type { Recommendation, RunAdvice } from '../../api/types'
import { withRunAdvice } from './advice'

function rec(id: Recommendation['id']): Recommendation {
  return {
    id, severity: 'high', title: id, text: '', view: 'Overview', metric: 1, unit: '%', start_us: null, end_us: null,
    link: null, links: [], saving_us: null, saving_pct: null, evidence_step: null, evidence_offset_us: null, whatif: null,
  }
}

describe('run-level advice', () => {
  const own = [rec('startup_captured'), rec('host_bound'), rec('communication_not_overlapped'), rec('dataloader')]
  const run: RunAdvice = { recommendations: [rec('straggler')], silences: ['communication_not_overlapped'], straggler: 'worker7', late_by_step: {}, skipped: {} }

  it('puts the straggler first after the profile problems and drops what it explains', () => {
    expect(withRunAdvice(own, run).map((r) => r.id)).toEqual(['startup_captured', 'straggler', 'host_bound', 'dataloader'])
  })

  it('leaves a worker alone without run-level advice', () => {
    expect(withRunAdvice(own, null)).toBe(own)
    expect(withRunAdvice(own, { ...run, recommendations: [], silences: [] })).toBe(own)
  })
})
