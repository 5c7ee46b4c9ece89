// UI state kept in the hash of the plugin's own (iframe) document, written with
// history.replaceState: a reload restores it and the URL can be shared. Defaults are omitted so
// URLs stay short. The query string (`?name=torch_prof`, read by TensorBoard's plugin_entry.html)
// is never touched.

import { useCallback, useEffect, useState } from 'react'
import { text, type SliceState } from './urlSlice'
import { diffSlice } from './views/diff/state'
import { kernelSlice } from './views/kernels/state'
import { memorySlice } from './views/memory/state'
import { operatorSlice } from './views/operators/state'
import { traceSlice } from './views/trace/state'

/** The shell's part: what is selected. */
const selectionSlice = {
  run: text('run'),
  view: text('view'),
  worker: text('worker'),
  span: text('span'),
}

const SLICES = { ...selectionSlice, ...memorySlice, ...diffSlice, ...operatorSlice, ...kernelSlice, ...traceSlice }

export type SelectionState = SliceState<typeof selectionSlice>
export type UiState = SliceState<typeof SLICES>
/** Switch to `view`, setting URL state with it (e.g. the Trace view's `tWin`). */
export type Navigate = (view: string, patch?: Partial<UiState>) => void
type Fields = [keyof UiState, (typeof SLICES)[keyof UiState]][]

export const DEFAULT_STATE = Object.fromEntries(Object.entries(SLICES).map(([field, f]) => [field, f.fallback])) as UiState

export function parseState(hash: string): UiState {
  const params = new URLSearchParams(hash.replace(/^#/, ''))
  const state: Record<string, string> = { ...DEFAULT_STATE }
  for (const [field, f] of Object.entries(SLICES) as Fields) {
    const value = params.get(f.key)
    if (value !== null && (!f.allowed || (f.allowed as readonly string[]).includes(value))) state[field] = value
  }
  return state as UiState
}

export function formatState(state: UiState): string {
  const params = new URLSearchParams()
  for (const [field, f] of Object.entries(SLICES) as Fields) {
    const value = state[field]
    if (value !== DEFAULT_STATE[field]) params.set(f.key, value)
  }
  const text = params.toString()
  return text ? `#${text}` : ''
}

function writeHash(state: UiState): void {
  const hash = formatState(state)
  const url = new URL(window.location.href)
  if (url.hash === hash || (url.hash === '' && hash === '')) return
  url.hash = hash
  try {
    window.history.replaceState(window.history.state, '', url.toString())
  } catch {
    // A sandboxed or opaque document: keep the state in memory only.
  }
}

/** The outer query parameter that carries the plugin's state in a shared TensorBoard link. */
export const OUTER_PARAM = 'torch_prof'

/**
 * A link to this view that opens in TensorBoard (not the bare plugin frame): TensorBoard's own
 * URL (the parent document, same origin) with our state as `?torch_prof=<state>` and our tab
 * (`#torch_prof`); the frame's own URL when there is no reachable parent.
 */
export function shareableUrl(state: UiState): string {
  try {
    const outer = window.parent !== window ? window.parent.location : null
    if (outer && outer.origin === window.location.origin) {
      const url = new URL(outer.href)
      url.searchParams.set(OUTER_PARAM, formatState(state).replace(/^#/, ''))
      url.hash = OUTER_PARAM
      return url.toString()
    }
  } catch {
    // a cross-origin parent: fall through
  }
  return window.location.href
}

/** The state a shared link carries (TensorBoard's URL, `?torch_prof=`), when the frame has none. */
function initialHash(): string {
  if (window.location.hash) return window.location.hash
  try {
    const outer = window.parent !== window ? new URL(window.parent.location.href) : null
    return outer?.searchParams.get(OUTER_PARAM) ?? ''
  } catch {
    return ''
  }
}

/** [state, update] where update merges a patch and mirrors the result into the URL. */
export function useUrlState(): [UiState, (patch: Partial<UiState>) => void] {
  const [state, setState] = useState<UiState>(() => parseState(initialHash()))

  useEffect(() => {
    writeHash(state)
  }, [state])

  useEffect(() => {
    const onHash = () => setState(parseState(window.location.hash))
    window.addEventListener('hashchange', onHash)
    return () => window.removeEventListener('hashchange', onHash)
  }, [])

  const update = useCallback((patch: Partial<UiState>) => {
    setState((prev) => {
      let changed = false
      for (const key of Object.keys(patch) as (keyof UiState)[]) {
        if (patch[key] !== undefined && patch[key] !== prev[key]) changed = true
      }
      return changed ? { ...prev, ...patch } : prev
    })
  }, [])

  return [state, update]
}
