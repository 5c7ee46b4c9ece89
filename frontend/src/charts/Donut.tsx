import { useMemo } from 'react'
import type { Pie } from '../api'
import type { Theme } from '../theme'
import { Chart } from './Chart'
import { donutOption } from './options'

interface Props {
  title: string
  pie: Pie | null
  theme: Theme
  testId?: string
  unit?: 'us' | 'ratio'
  colors?: string[]
  height?: number
  emptyText?: string
  /** Short text in the hole of the donut (e.g. a percentage). */
  centerLabel?: string
}

/** A titled donut chart; shows a short note instead when there is nothing to plot. */
export function Donut({ title, pie, theme, testId, unit = 'us', colors, height = 240, emptyText = 'No data', centerLabel }: Props) {
  const option = useMemo(() => (pie ? donutOption(pie, theme, { unit, colors }) : null), [pie, theme, unit, colors])
  return (
    <figure className="donut" data-testid={testId}>
      <figcaption className="donut-title">{title}</figcaption>
      {option ? (
        <div className="donut-chart">
          <Chart option={option} height={height} label={`${title} chart`} />
          {centerLabel && (
            <div className="donut-center" data-testid={testId ? `${testId}-center` : undefined}>
              {centerLabel}
            </div>
          )}
        </div>
      ) : (
        <div className="donut-empty" style={{ height }}>
          {emptyText}
        </div>
      )}
    </figure>
  )
}
