import { useEffect, useRef } from 'react'
import { echarts, type EChartsCoreOption } from './echarts'

interface Props {
  option: EChartsCoreOption
  height: number
  label: string
  testId?: string
  onClickName?: (name: string) => void
}

/** An ECharts canvas that follows its container's width and is disposed with the component. */
export function Chart({ option, height, label, testId, onClickName }: Props) {
  const ref = useRef<HTMLDivElement>(null)
  const chartRef = useRef<ReturnType<typeof echarts.init> | null>(null)
  const clickRef = useRef(onClickName)
  clickRef.current = onClickName

  useEffect(() => {
    const el = ref.current
    if (!el) return
    const chart = echarts.init(el, undefined, { renderer: 'canvas' })
    chartRef.current = chart
    chart.on('click', (params) => {
      const name = (params as { name?: unknown }).name
      if (typeof name === 'string') clickRef.current?.(name)
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
    chartRef.current?.setOption(option, { notMerge: true })
  }, [option])

  return <div ref={ref} className="chart" style={{ height }} role="img" aria-label={label} data-testid={testId} />
}
