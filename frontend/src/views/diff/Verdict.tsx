// The Diff's verdict: the header line (regressed / improved / unchanged at 95%, the change per
// step with its interval, what the interval rests on) and the per-row interval cell; rows
// whose change is within noise are greyed by the table (`withinNoise`).
import { signedDuration } from '../../format'
import type { DiffChild, DiffPayload } from './api'

export type DiffVerdict = NonNullable<DiffPayload['verdict']>
export type DiffInterval = NonNullable<DiffChild['interval']>

const WORDS: Record<DiffInterval['verdict'], string> = {
  regressed: 'Regressed',
  improved: 'Improved',
  unchanged: 'Unchanged (within noise)',
}

export function withinNoise(child: DiffChild): boolean {
  return child.interval?.verdict === 'unchanged'
}

export function boundsText(iv: DiffInterval): string {
  return `[${signedDuration(iv.low_us)}, ${signedDuration(iv.high_us)}]`
}

export function intervalText(iv: DiffInterval): string {
  return `${signedDuration(iv.delta_us)} ${boundsText(iv)}`
}

export function VerdictHeader({ verdict }: { verdict: DiffPayload['verdict'] }) {
  if (!verdict) return <div className="diff-verdict none" data-testid="diff-verdict">No verdict: a side has no profiler steps to compare</div>
  const pct = verdict.relative === null ? '' : ` (${verdict.relative > 0 ? '+' : ''}${(verdict.relative * 100).toFixed(1)} %)`
  return (
    <div className={`diff-verdict ${verdict.verdict}`} data-testid="diff-verdict" data-verdict={verdict.verdict}>
      <b data-testid="diff-verdict-word">{WORDS[verdict.verdict]}</b>
      <span>
        {' '}
        at {Math.round(verdict.confidence * 100)} % confidence: {intervalText(verdict)} per step{pct}
      </span>
      <span className="muted small" title={verdict.note}>
        {' '}
        · changes under {(verdict.min_change * 100).toFixed(0)} % of the baseline step ({signedDuration(verdict.floor_us).replace(/^\+/, '')}) count as noise · interval over steps only
      </span>
    </div>
  )
}

export function IntervalCell({ child }: { child: DiffChild }) {
  const iv = child.interval
  if (!iv) return <td className="right muted" data-col="interval">–</td>
  return (
    <td className="right nowrap" data-col="interval" data-verdict={iv.verdict} title={`Change per step ${intervalText(iv)} (95 % interval): ${iv.verdict}`}>
      {boundsText(iv)}
    </td>
  )
}
