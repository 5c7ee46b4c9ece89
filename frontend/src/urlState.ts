// UI state kept in the hash of the plugin's own (iframe) document, written with
// history.replaceState: a reload restores it and the URL can be shared. Defaults are omitted so
// URLs stay short. The query string (`?name=torch_prof`, read by TensorBoard's plugin_entry.html)
// is never touched.

import { useCallback, useEffect, useState } from 'react'

export interface UiState {
  run: string
  view: string
  worker: string
  span: string
  /** Memory view: the device shown ('' = the default device) */
  memDevice: string
  /** Diff view: the experiment side (the baseline is run/worker/span) and the drill-down path */
  expRun: string
  expWorker: string
  expSpan: string
  diffPath: string
  /** Operator view */
  opGroup: 'operator' | 'operator_input_shape'
  opSearch: string
  opTopN: string
  opSort: string
  /** Kernel view */
  kGroup: 'kernel' | 'kernel_op_launch'
  kSearch: string
  kOpSearch: string
  kTopN: string
  kSort: string
}

export const DEFAULT_STATE: UiState = {
  run: '',
  view: '',
  worker: '',
  span: '',
  memDevice: '',
  expRun: '',
  expWorker: '',
  expSpan: '',
  diffPath: '',
  opGroup: 'operator',
  opSearch: '',
  opTopN: '10',
  opSort: '',
  kGroup: 'kernel',
  kSearch: '',
  kOpSearch: '',
  kTopN: '10',
  kSort: '',
}

const KEYS: Record<keyof UiState, string> = {
  run: 'run',
  view: 'view',
  worker: 'worker',
  span: 'span',
  memDevice: 'mem_device',
  expRun: 'exp_run',
  expWorker: 'exp_worker',
  expSpan: 'exp_span',
  diffPath: 'diff_path',
  opGroup: 'op_group',
  opSearch: 'op_q',
  opTopN: 'op_top',
  opSort: 'op_sort',
  kGroup: 'k_group',
  kSearch: 'k_q',
  kOpSearch: 'k_op_q',
  kTopN: 'k_top',
  kSort: 'k_sort',
}

export function parseState(hash: string): UiState {
  const params = new URLSearchParams(hash.replace(/^#/, ''))
  const state: UiState = { ...DEFAULT_STATE }
  for (const [field, key] of Object.entries(KEYS) as [keyof UiState, string][]) {
    const value = params.get(key)
    if (value !== null) (state as unknown as Record<string, string>)[field] = value
  }
  if (state.opGroup !== 'operator' && state.opGroup !== 'operator_input_shape') state.opGroup = 'operator'
  if (state.kGroup !== 'kernel' && state.kGroup !== 'kernel_op_launch') state.kGroup = 'kernel'
  return state
}

export function formatState(state: UiState): string {
  const params = new URLSearchParams()
  for (const [field, key] of Object.entries(KEYS) as [keyof UiState, string][]) {
    const value = state[field]
    if (value !== DEFAULT_STATE[field]) params.set(key, value)
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
