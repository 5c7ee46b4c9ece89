import { useEffect, useRef } from 'react'
import { echarts, type EChartsCoreOption } from './echarts'

export type EChartsInstance = ReturnType<typeof echarts.init>

interface Props {
  option: EChartsCoreOption
  height: number
  label: string
  testId?: string
  onClickName?: (name: string) => void
  /** ECharts events (e.g. `datazoom`, `click`) with the event params and the chart. */
  onEvents?: Record<string, (params: unknown, chart: EChartsInstance) => void>
  /** Called after each setOption (e.g. to dispatch an action the option cannot express). */
  onOption?: (chart: EChartsInstance) => void
}

/** An ECharts canvas that follows its container's width and is disposed with the component. */
export function Chart({ option, height, label, testId, onClickName, onEvents, onOption }: Props) {
  const ref = useRef<HTMLDivElement>(null)
  const chartRef = useRef<EChartsInstance | null>(null)
  const clickRef = useRef(onClickName)
  clickRef.current = onClickName
  const eventsRef = useRef(onEvents)
  eventsRef.current = onEvents
  const optionRef = useRef(onOption)
  optionRef.current = onOption
  const eventNames = Object.keys(onEvents ?? {}).sort().join(',')

  useEffect(() => {
    const el = ref.current
    if (!el) return
    const chart = echarts.init(el, undefined, { renderer: 'canvas' })
    chartRef.current = chart
    chart.on('click', (params) => {
      const name = (params as { name?: unknown }).name
      if (typeof name === 'string') clickRef.current?.(name)
    })
    // data-rendered: the last option is drawn (animations done), for tests and screenshots.
    chart.on('finished', () => {
      el.dataset.rendered = 'true'
    })
    const observer = new ResizeObserver(() => chart.resize())
    observer.observe(el)
    return () => {
      observer.disconnect()
      chart.dispose()
      chartRef.current = null
    }
  }, [])

  useEffect(() => {
    const chart = chartRef.current
    if (!chart || !eventNames) return
    const handlers = eventNames.split(',').map((name) => [name, (params: unknown) => eventsRef.current?.[name]?.(params, chart)] as const)
    for (const [name, handler] of handlers) chart.on(name, handler)
    return () => {
      for (const [name, handler] of handlers) chart.off(name, handler)
    }
  }, [eventNames])

  useEffect(() => {
    const chart = chartRef.current
    if (!chart) return
    ref.current?.setAttribute('data-rendered', 'false')
    chart.setOption(option, { notMerge: true })
    optionRef.current?.(chart)
  }, [option])

  return <div ref={ref} className="chart" style={{ height }} role="img" aria-label={label} data-testid={testId} />
}
