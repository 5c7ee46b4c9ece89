import { useEffect, useMemo, useRef, useState, type RefObject } from 'react'
import type { Pie, Slices } from '../api'
import type { Theme } from '../theme'
import { Chart } from './Chart'
import { donutOption } from './options'

/** The donut of a server pie: the slices with an arc (value > 0); null when none has one. */
export function pieOf(slices: Slices): Pie | null {
  const kept = (slices ?? []).filter((s) => s.value > 0)
  if (kept.length === 0) return null
  return { slices: kept, other: 0, total: kept.reduce((acc, s) => acc + s.value, 0) }
}

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
  const ref = useRef<HTMLElement>(null)
  const width = useWidth(ref)
  // The legend takes the right ~44% of the chart; its labels are cut (with an ellipsis) to fit.
  const legendWidth = Math.max(72, Math.round(width * 0.44) - 28)
  const option = useMemo(
    () => (pie && width > 0 ? donutOption(pie, theme, { unit, colors, legendWidth }) : null),
    [pie, theme, unit, colors, legendWidth, width],
  )
  return (
    <figure className="donut" data-testid={testId} ref={ref}>
      <figcaption className="donut-title">{title}</figcaption>
      {pie ? (
        <div className="donut-chart">
          {option ? <Chart option={option} height={height} label={`${title} chart`} /> : <div style={{ height }} />}
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

/** The element's content width, kept up to date (rounded to 8 px so small jitters do not redraw). */
function useWidth(ref: RefObject<HTMLElement | null>): number {
  const [width, setWidth] = useState(0)
  useEffect(() => {
    const el = ref.current
    if (!el) return
    const update = () => setWidth(Math.round(el.clientWidth / 8) * 8)
    update()
    const observer = new ResizeObserver(update)
    observer.observe(el)
    return () => observer.disconnect()
  }, [ref])
  return width
}
