// A worker's recommendations with the run-level ones (`/overview/run`: the straggler) first, as
// `tb_plugin.analysis.advice.straggler.with_run_advice` orders them: after the profile's own
// problems, and without the worker's items that the run-level ones explain (`silences`).

import type { Recommendation, RunAdvice } from '../../api/types'

const PROFILE_RULES = new Set(['startup_captured', 'foreign_step_marker'])

export function withRunAdvice(own: Recommendation[], run: RunAdvice | null | undefined): Recommendation[] {
  if (!run || run.recommendations.length === 0) return own
  const silenced = new Set<string>(run.silences)
  const profile = own.filter((r) => PROFILE_RULES.has(r.id))
  const rest = own.filter((r) => !PROFILE_RULES.has(r.id) && !silenced.has(r.id))
  return [...profile, ...run.recommendations, ...rest]
}

/** Words of a slow step's cause (`analysis.variance.steps.CAUSES`). */
export const CAUSE_WORDS: Record<string, string> = {
  communication: 'communication wait',
  synchronisation: 'synchronisation',
  data_loading: 'data loading',
  host_compute: 'host compute',
  device: 'device work',
  host_stall: 'host stall (no operator)',
}
