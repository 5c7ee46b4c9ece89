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

/** The shell's part: what is selected. */
const selectionSlice = {
  run: text('run'),
  view: text('view'),
  worker: text('worker'),
  span: text('span'),
}

const SLICES = { ...selectionSlice, ...memorySlice, ...diffSlice, ...operatorSlice, ...kernelSlice }

export type SelectionState = SliceState<typeof selectionSlice>
export type UiState = SliceState<typeof SLICES>
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

/** [state, update] where update merges a patch and mirrors the result into the URL. */
export function useUrlState(): [UiState, (patch: Partial<UiState>) => void] {
  const [state, setState] = useState<UiState>(() => parseState(window.location.hash))

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
