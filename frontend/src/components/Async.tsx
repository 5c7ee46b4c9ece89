import type { ReactNode } from 'react'
import type { AsyncState } from '../api/query'
import { ErrorBanner, Loading } from './ui'

/**
 * The one loading/error switch of the views: an error banner naming `what` failed, a progress
 * bar (the server's 202 progress) while pending, else `children` with the data.
 */
export function Async<T>({ state, what, label, children }: { state: AsyncState<T>; what: string; label: string; children: (data: T) => ReactNode }) {
  if (state.status === 'error') return <ErrorBanner error={state.error} what={what} />
  if (state.status !== 'ok') return <Loading progress={state.status === 'pending' ? state.progress : null} label={label} />
  return <>{children(state.data)}</>
}
