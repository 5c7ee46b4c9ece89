// Shared words of a recommendation (Overview and GPU Idle): its saving and where its evidence is.

import type { Recommendation } from '../api/types'
import { duration } from '../format'

/** "saves up to 4.50 ms per step (90 %)", or null for advice that is not priced. */
export function savingText(rec: Recommendation): string | null {
  if (rec.saving_us === null || rec.saving_us === undefined || rec.saving_pct === null || rec.saving_pct === undefined) return null
  return `saves up to ${duration(rec.saving_us)} per step (${rec.saving_pct.toFixed(1)} %)`
}

/** "a 12.3 ms range, 3.20 ms into step 5" (relative to the step, never an epoch time), or null
 * when the recommendation has no range. */
export function evidenceText(rec: Recommendation): string | null {
  if (rec.start_us === null || rec.end_us === null) return null
  const range = `a ${duration(rec.end_us - rec.start_us)} range`
  const step = rec.evidence_step ?? null
  const offset = rec.evidence_offset_us ?? null
  return step !== null && offset !== null ? `${range}, ${duration(offset)} into step ${step}` : range
}

/** The Trace view's `t_win` for the evidence, or null without a range. */
export function evidenceWindow(rec: Recommendation): string | null {
  return rec.start_us === null || rec.end_us === null || !(rec.end_us > rec.start_us) ? null : `${rec.start_us},${rec.end_us}`
}
