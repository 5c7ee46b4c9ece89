// The Overview's step-variance card: CV, spread and the slow outlier steps with the cause that
// grew (`analysis.variance.steps`), each opening the Trace view on its evidence.

import type { RunAdvice, StepVariance } from '../../api/types'
import { Card, Stat } from '../../components/ui'
import { duration, num2, pct } from '../../format'
import type { Navigate } from '../../urlState'
import { CAUSE_WORDS } from './advice'

export function VarianceCard({
  variance,
  lateByStep,
  onNavigate,
  traceShown,
}: {
  variance: StepVariance
  lateByStep: RunAdvice['late_by_step'] | undefined
  onNavigate: Navigate
  traceShown: boolean
}) {
  if (variance.steps < 2) return null
  return (
    <Card
      title="Step variance"
      subtitle={`Slow outlier steps: robust z-score above ${variance.z_threshold} (0.6745 × (t − median) / MAD), with the cause that grew most over the median step`}
      testId="step-variance"
    >
      <div className="variance-stats">
        <Stat label="Step-time CV" value={<span data-testid="variance-cv">{variance.cv_pct == null ? 'n/a' : pct(variance.cv_pct)}</span>} />
        <Stat label="Median step" value={duration(variance.median_us)} />
        <Stat label="Std. deviation" value={duration(variance.std_us)} />
        <Stat label="Outliers" value={<span data-testid="variance-outlier-count">{variance.outliers.length}</span>} />
      </div>
      {variance.outliers.length > 0 && (
        <table className="simple-table variance-table" data-testid="variance-outliers">
          <thead>
            <tr>
              <th>Step</th>
              <th className="right">Time</th>
              <th className="right">Over median</th>
              <th className="right">z</th>
              <th>Cause</th>
              <th className="right">Cause grew</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {variance.outliers.map((o) => (
              <tr key={o.step} data-step={o.step}>
                <td className="mono">{o.step}</td>
                <td className="right mono">{duration(o.total_us)}</td>
                <td className="right mono">+{duration(o.excess_us)}</td>
                <td className="right mono">{num2(o.z)}</td>
                <td data-testid="variance-cause">
                  {CAUSE_WORDS[o.cause] ?? o.cause}
                  {o.cause === 'communication' && lateByStep?.[o.step] ? (
                    <span className="muted">
                      {' '}
                      · waited for {lateByStep[o.step].worker} ({duration(lateByStep[o.step].skew_us)} late)
                    </span>
                  ) : null}
                </td>
                <td className="right mono">+{duration(o.cause_us)}</td>
                <td>
                  {traceShown && o.start_us != null && o.end_us != null && o.end_us > o.start_us && (
                    <button type="button" className="link-button" onClick={() => onNavigate('Trace', { tWin: `${o.start_us},${o.end_us}`, tCrit: '' })}>
                      Show on Trace →
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Card>
  )
}
