import { useEffect, useRef, useState } from 'react'
import { LoadingError } from './api'

export type AsyncState<T> =
  | { status: 'idle' }
  | { status: 'pending'; progress: number | null; previous?: T }
  | { status: 'ok'; data: T }
  | { status: 'error'; error: Error }

/**
 * Runs `load` whenever `key` changes (null = nothing to load). A 202 from the server
 * (LoadingError) is retried every `retryMs` while the progress is shown.
 */
export function useAsync<T>(key: string | null, load: (signal: AbortSignal) => Promise<T>, retryMs = 1000): AsyncState<T> {
  const [state, setState] = useState<AsyncState<T>>({ status: 'idle' })
  const loadRef = useRef(load)
  loadRef.current = load

  useEffect(() => {
    if (key === null) {
      setState({ status: 'idle' })
      return
    }
    const controller = new AbortController()
    let timer: number | undefined
    setState((prev) => ({
      status: 'pending',
      progress: null,
      previous: prev.status === 'ok' ? prev.data : prev.status === 'pending' ? prev.previous : undefined,
    }))
    const attempt = () => {
      loadRef.current(controller.signal).then(
        (data) => {
          if (!controller.signal.aborted) setState({ status: 'ok', data })
        },
        (error: Error) => {
          if (controller.signal.aborted || error.name === 'AbortError') return
          if (error instanceof LoadingError) {
            setState((prev) => ({
              status: 'pending',
              progress: error.progress,
              previous: prev.status === 'pending' ? prev.previous : undefined,
            }))
            timer = window.setTimeout(attempt, retryMs)
          } else {
            setState({ status: 'error', error })
          }
        },
      )
    }
    attempt()
    return () => {
      controller.abort()
      if (timer !== undefined) window.clearTimeout(timer)
    }
  }, [key, retryMs])

  return state
}

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
export const MAX_CHART_SLICES = 50

export function chartSlices(topN: number | null): number {
  return topN === null ? 20 : Math.min(topN, MAX_CHART_SLICES)
}
