import { useEffect, useState } from 'react'

export { useAsync, type AsyncState } from './api/query'

/** The value, `delay` ms after it last changed. */
export function useDebounced<T>(value: T, delay: number): T {
  const [debounced, setDebounced] = useState(value)
  useEffect(() => {
    const timer = window.setTimeout(() => setDebounced(value), delay)
    return () => window.clearTimeout(timer)
  }, [value, delay])
  return debounced
}

/** Parses a Top-N text box: a positive integer, or null for "all". */
export function parseTopN(text: string): number | null {
  const trimmed = text.trim().toLowerCase()
  if (trimmed === '' || trimmed === 'all') return null
  const n = Number(trimmed)
  return Number.isInteger(n) && n > 0 ? n : null
}

/** Donuts stay readable: "all" shows the top 20, and no chart gets more than 50 slices. */
const MAX_CHART_SLICES = 50

export function chartSlices(topN: number | null): number {
  return topN === null ? 20 : Math.min(topN, MAX_CHART_SLICES)
}
