// TanStack Query is the one place that schedules requests: it aborts what a view no longer
// needs, retries a 202 (LoadingError) after the server's Retry-After, and keeps the previous
// data while the next key loads. getJson (./http.ts) does the HTTP itself.
import { keepPreviousData, QueryClient, useQuery } from '@tanstack/react-query'
import { LoadingError } from './http'

export function makeQueryClient(): QueryClient {
  return new QueryClient({
    defaultOptions: {
      queries: {
        // The plugin runs on localhost or behind TensorBoard: navigator.onLine says nothing about
        // whether it can be reached, so never pause on it.
        networkMode: 'always',
        refetchOnWindowFocus: false,
        refetchOnReconnect: false,
        retry: (_count, error) => error instanceof LoadingError,
        retryDelay: (_count, error) => (error instanceof LoadingError ? error.retryAfterMs : 1000),
        placeholderData: keepPreviousData,
      },
    },
  })
}

export type AsyncState<T> =
  | { status: 'idle' }
  | { status: 'pending'; progress: number | null; previous?: T }
  | { status: 'ok'; data: T }
  | { status: 'error'; error: Error }

/**
 * The data of `load` for `key` (null = nothing to load), as one of four states. `route` names
 * what is loaded, so that equal keys of different requests never share a cache entry. While the
 * server answers 202 the state is pending with its progress; while a new key loads, pending
 * carries the previous key's data.
 */
export function useAsync<T>(route: string, key: string | null, load: (signal: AbortSignal) => Promise<T>): AsyncState<T> {
  const query = useQuery<T, Error>({
    queryKey: [route, key],
    queryFn: ({ signal }) => load(signal),
    enabled: key !== null,
  })
  if (key === null) return { status: 'idle' }
  if (query.status === 'error') return { status: 'error', error: query.error }
  if (query.status === 'success' && !query.isPlaceholderData) return { status: 'ok', data: query.data }
  const reason = query.failureReason
  return {
    status: 'pending',
    progress: reason instanceof LoadingError ? reason.progress : null,
    previous: query.isPlaceholderData ? query.data : undefined,
  }
}
