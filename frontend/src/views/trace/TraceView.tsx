// The Trace view: a level-of-detail timeline drawn on a canvas (engine.ts), with a toolbar
// (fit/zoom, flows, whole-trace search, download, Open in Perfetto) and a details panel for the
// selected event. React renders the chrome around the canvas; the canvas itself is never
// re-rendered by React.

import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState, type KeyboardEvent } from 'react'
import type { Selection } from '../../api'
import { Banner, ErrorBanner, Loading } from '../../components/ui'
import type { Theme } from '../../theme'
import { traceApi, type Partner, type SearchMatch, type SearchResult, type TrackInfo } from './api'
import { DetailsPanel, type DetailsState } from './DetailsPanel'
import { TraceEngine, type EventRef } from './engine'
import { openInPerfetto } from './perfetto'
import { RangePanel, type RangeSel } from './RangePanel'
import { parseWindow, type TraceUrlState } from './state'
import { formatTrackList, parseTrackList, type TrackList } from './trackList'
import { TrackMenu } from './TrackMenu'
import css from './trace.css?inline'

const SEARCH_LIMIT = 200

function useTraceStyles(): void {
  useLayoutEffect(() => {
    if (document.getElementById('torch-prof-trace-style')) return
    const style = document.createElement('style')
    style.id = 'torch-prof-trace-style'
    style.textContent = css
    document.head.appendChild(style)
  }, [])
}

interface TraceProps {
  selection: Selection
  theme: Theme
  state: TraceUrlState
  update: (patch: Partial<TraceUrlState>) => void
}

export function TraceView({ selection, theme, state, update }: TraceProps) {
  useTraceStyles()
  const key = `${selection.run}\u0000${selection.worker}\u0000${selection.span}`
  return <TraceSession key={key} selection={selection} theme={theme} state={state} update={update} />
}

/** The critical-path highlight in the toolbar (GPU Idle's "Show on Trace"): its step, and ✕. */
function CriticalChip({ step, onClear }: { step: string; onClear: () => void }) {
  return (
    <span className="trace-chip on trace-critical" data-testid="trace-critical" title="Events on this step's critical path are outlined, the others dimmed; the path's edges are drawn in order (GPU Idle view)">
      Critical path · step {step}
      <button type="button" className="icon-button" onClick={onClear} aria-label="Clear the critical-path highlight" data-testid="trace-critical-clear">
        ✕
      </button>
    </span>
  )
}

type FirstState = { status: 'pending'; progress: number | null } | { status: 'ok'; tracks: TrackInfo[]; traceStart: number; flowCats: string[]; empty: boolean } | { status: 'error'; error: Error }

interface Picked {
  id: number
  ref: EventRef | null
  /** Reveal it once its details are known (a link to an event we have no geometry for). */
  reveal: boolean
}

interface SearchState {
  query: string
  status: 'idle' | 'pending' | 'ok' | 'error'
  result: SearchResult | null
  matches: SearchMatch[]
  index: number
  error?: Error
}

const NO_SEARCH: SearchState = { query: '', status: 'idle', result: null, matches: [], index: -1 }

function refFromMatch(m: { id: number; name: string | null; ts: number | null; dur: number | null; track: number | null; depth: number | null }, traceStart: number): EventRef | null {
  if (m.ts === null || m.track === null || m.depth === null) return null
  const start = m.ts - traceStart
  return { id: m.id, name: m.name ?? '', start, end: start + Math.max(0, m.dur ?? 0), track: m.track, depth: m.depth }
}

function TraceSession({ selection, theme, state, update }: TraceProps) {
  const viewRef = useRef<HTMLDivElement>(null)
  const rootRef = useRef<HTMLDivElement>(null)
  const scrollerRef = useRef<HTMLDivElement>(null)
  const canvasRef = useRef<HTMLCanvasElement>(null)
  const spacerRef = useRef<HTMLDivElement>(null)
  const tooltipRef = useRef<HTMLDivElement>(null)
  const infoRef = useRef<HTMLSpanElement>(null)
  const engineRef = useRef<TraceEngine | null>(null)
  const themeRef = useRef(theme)
  themeRef.current = theme
  // The arranged track list lives in the URL (state.ts); the engine lays the tracks out from it.
  const { trPin, trHide, trOrder, trFold } = state
  const trackList = useMemo(() => parseTrackList({ trPin, trHide, trOrder, trFold }), [trPin, trHide, trOrder, trFold])
  const updateRef = useRef(update)
  updateRef.current = update
  const setTrackList = useCallback((list: TrackList) => updateRef.current(formatTrackList(list)), [])
  const critical = state.tCrit || null
  const onClearCritical = useCallback(() => updateRef.current({ tCrit: '' }), [])
  const criticalRef = useRef(critical)
  criticalRef.current = critical
  const evidence = useMemo(() => parseWindow(state.tWin), [state.tWin])
  const evidenceRef = useRef(evidence)
  evidenceRef.current = evidence

  const [first, setFirst] = useState<FirstState>({ status: 'pending', progress: null })
  const [frameError, setFrameError] = useState<Error | null>(null)
  const [picked, setPicked] = useState<Picked | null>(null)
  const [details, setDetails] = useState<DetailsState>({ status: 'none' })
  const [flowsOn, setFlowsOn] = useState(false)
  const [flowCatsOff, setFlowCatsOff] = useState<Set<string>>(() => new Set())
  const [search, setSearch] = useState<SearchState>(NO_SEARCH)
  const [perfetto, setPerfetto] = useState<{ text: string | null; error: boolean }>({ text: null, error: false })
  const [height, setHeight] = useState(640)
  const [range, setRange] = useState<RangeSel | null>(null)

  const traceStart = first.status === 'ok' ? first.traceStart : 0

  // Fill the viewport below the view's top (TensorBoard gives the iframe the tab's height).
  useLayoutEffect(() => {
    const fitHeight = () => {
      const el = viewRef.current
      if (!el) return
      const top = el.getBoundingClientRect().top + window.scrollY
      setHeight(Math.max(460, Math.floor(window.innerHeight - top - 16)))
    }
    fitHeight()
    window.addEventListener('resize', fitHeight)
    return () => window.removeEventListener('resize', fitHeight)
  }, [])

  // The engine lives as long as this session (one run/worker/span).
  useEffect(() => {
    const root = rootRef.current
    const scroller = scrollerRef.current
    const canvas = canvasRef.current
    const spacer = spacerRef.current
    const tooltip = tooltipRef.current
    if (!root || !scroller || !canvas || !spacer || !tooltip) return
    const engine = new TraceEngine({ root, scroller, canvas, spacer, tooltip, info: infoRef.current }, selection, themeRef.current, {
      onFirstFrame: (state) => {
        if (state.status === 'ok') {
          const f = state.frame
          const tracks: TrackInfo[] = []
          for (const t of f.tracks) if (t) tracks[t.id] = t
          setFirst({ status: 'ok', tracks, traceStart: f.traceStart, flowCats: f.flows.cats, empty: f.tracks.filter(Boolean).length === 0 })
        } else setFirst(state)
      },
      onSelect: (ref) => setPicked(ref ? { id: ref.id, ref, reveal: false } : null),
      onFrameError: setFrameError,
      onRange: setRange,
      onTrackList: setTrackList,
    }, criticalRef.current)
    engineRef.current = engine
    if (evidenceRef.current) engine.showWindow(evidenceRef.current)
    return () => {
      engine.destroy()
      engineRef.current = null
    }
  }, [selection, setTrackList])

  useEffect(() => {
    engineRef.current?.setTrackList(trackList)
  }, [trackList, selection])

  useEffect(() => {
    engineRef.current?.setTheme(theme)
  }, [theme])

  useEffect(() => {
    engineRef.current?.setFlows(flowsOn, flowCatsOff)
  }, [flowsOn, flowCatsOff])

  useEffect(() => {
    if (evidence) engineRef.current?.showWindow(evidence)
  }, [evidence])

  useEffect(() => {
    engineRef.current?.setCritical(critical)
  }, [critical])

  // Details of the picked event.
  useEffect(() => {
    if (!picked) {
      setDetails({ status: 'none' })
      return
    }
    const controller = new AbortController()
    setDetails({ status: 'pending', id: picked.id, name: picked.ref?.name })
    traceApi.event(selection, picked.id, controller.signal).then(
      (data) => {
        if (controller.signal.aborted) return
        setDetails({ status: 'ok', data })
        const engine = engineRef.current
        if (!engine) return
        if (!picked.ref || picked.reveal) {
          const ref = refFromMatch(data, traceStart)
          if (ref) engine.select(ref, true)
        }
        const related = data.correlated.map((p) => refFromMatch(p, traceStart)).filter((r): r is EventRef => r !== null)
        engine.setRelated(related)
      },
      (error: Error) => {
        if (!controller.signal.aborted && error.name !== 'AbortError') setDetails({ status: 'error', id: picked.id, error })
      },
    )
    return () => controller.abort()
  }, [picked, selection, traceStart])

  const jump = useCallback(
    (target: { id: number; partner?: Partner }) => {
      const ref = target.partner ? refFromMatch(target.partner, traceStart) : null
      if (ref) engineRef.current?.select(ref, true)
      setPicked({ id: target.id, ref, reveal: !ref })
    },
    [traceStart],
  )

  const closeDetails = useCallback(() => {
    engineRef.current?.select(null)
    setPicked(null)
  }, [])

  // ---- search (whole trace, server side)

  const query = search.query.trim()
  useEffect(() => {
    if (!query) {
      setSearch((s) => (s.status === 'idle' && !s.result ? s : { ...NO_SEARCH, query: s.query }))
      engineRef.current?.setSearchNames(null)
      return
    }
    engineRef.current?.setSearchNames(null)
    const controller = new AbortController()
    const timer = window.setTimeout(() => {
      traceApi.search(selection, query, SEARCH_LIMIT, undefined, controller.signal).then(
        (result) => {
          if (controller.signal.aborted) return
          setSearch((s) => ({ ...s, status: 'ok', result, matches: result.matches, index: -1 }))
          // Dim what does not match, when the server listed every matching name.
          engineRef.current?.setSearchNames(result.name_count <= result.names.length ? result.names : null)
        },
        (error: Error) => {
          if (!controller.signal.aborted && error.name !== 'AbortError') setSearch((s) => ({ ...s, status: 'error', error }))
        },
      )
    }, 250)
    return () => {
      window.clearTimeout(timer)
      controller.abort()
    }
  }, [query, selection])

  const goToMatch = useCallback(
    (m: SearchMatch) => {
      const ref = refFromMatch(m, traceStart)
      if (!ref) return
      engineRef.current?.select(ref, true)
      setPicked({ id: m.id, ref, reveal: false })
    },
    [traceStart],
  )

  const step = useCallback(
    async (dir: 1 | -1) => {
      const s = search
      if (s.status !== 'ok' || !s.result || s.matches.length === 0) return
      let matches = s.matches
      let index = s.index + dir
      if (s.index === -1 && dir === -1) index = matches.length - 1
      if (index >= matches.length) {
        const loadedAll = matches.length >= s.result.total
        if (!loadedAll) {
          // Next page: matches from the last loaded start on (ids already seen dropped).
          const last = matches[matches.length - 1]
          const seen = new Set(matches.map((m) => m.id))
          try {
            const more = await traceApi.search(selection, query, SEARCH_LIMIT, last.ts)
            const fresh = more.matches.filter((m) => !seen.has(m.id))
            matches = [...matches, ...fresh]
          } catch {
            // keep what we have
          }
          if (index >= matches.length) index = 0
        } else index = 0
      }
      if (index < 0) index = matches.length >= s.result.total ? matches.length - 1 : 0
      setSearch({ ...s, matches, index })
      goToMatch(matches[index])
    },
    [search, selection, query, goToMatch],
  )

  const onSearchKey = (e: KeyboardEvent<HTMLInputElement>) => {
    if (e.key === 'Enter') {
      e.preventDefault()
      void step(e.shiftKey ? -1 : 1)
    } else if (e.key === 'Escape') {
      setSearch(NO_SEARCH)
    }
  }

  // ---- Perfetto

  const perfettoCancel = useRef<(() => void) | null>(null)
  useEffect(() => () => perfettoCancel.current?.(), [])
  const onPerfetto = () => {
    perfettoCancel.current?.()
    perfettoCancel.current = openInPerfetto(traceApi.downloadUrl(selection), `${selection.run} · ${selection.worker}`, (text, error = false) => setPerfetto({ text, error }))
  }

  const downloadUrl = traceApi.downloadUrl(selection)
  const ready = first.status === 'ok'
  const total = search.result?.total ?? 0
  const flowCats = first.status === 'ok' ? first.flowCats : []

  return (
    <div className="view trace-view" ref={viewRef} style={{ height }} data-testid="trace-view">
      <div className="toolbar trace-toolbar">
        <div className="trace-btn-group" role="group" aria-label="Zoom">
          <button type="button" className="button compact" onClick={() => engineRef.current?.fit()} disabled={!ready} data-testid="trace-fit" title="Show the whole trace (double-click)">
            Fit
          </button>
          <button type="button" className="button compact square" onClick={() => engineRef.current?.zoomBy(0.5)} disabled={!ready} aria-label="Zoom in" title="Zoom in (W)">
            +
          </button>
          <button type="button" className="button compact square" onClick={() => engineRef.current?.zoomBy(2)} disabled={!ready} aria-label="Zoom out" title="Zoom out (S)">
            −
          </button>
        </div>
        <TrackMenu tracks={first.status === 'ok' ? first.tracks : []} list={trackList} onChange={setTrackList} disabled={!ready} />
        <div className="trace-flows">
          <label className={`trace-toggle${flowsOn ? ' on' : ''}`} title="Draw flow arrows (CPU launch → GPU kernel, forward → backward)">
            <input type="checkbox" checked={flowsOn} onChange={(e) => setFlowsOn(e.target.checked)} disabled={!ready} data-testid="trace-flows-toggle" />
            Flows
          </label>
          {flowsOn &&
            flowCats.map((cat) => (
              <label key={cat} className={`trace-chip${flowCatsOff.has(cat) ? '' : ' on'}`} data-cat={cat}>
                <input
                  type="checkbox"
                  checked={!flowCatsOff.has(cat)}
                  onChange={(e) => {
                    const next = new Set(flowCatsOff)
                    if (e.target.checked) next.delete(cat)
                    else next.add(cat)
                    setFlowCatsOff(next)
                  }}
                />
                {cat}
              </label>
            ))}
        </div>
        {critical && <CriticalChip step={critical} onClear={onClearCritical} />}
        <div className="trace-search">
          <div className="search">
            <svg className="search-icon" viewBox="0 0 24 24" aria-hidden="true">
              <path d="M15.5 14h-.79l-.28-.27A6.47 6.47 0 0 0 16 9.5 6.5 6.5 0 1 0 9.5 16c1.61 0 3.09-.59 4.23-1.57l.27.28v.79l5 4.99L20.49 19l-4.99-5zm-6 0C7.01 14 5 11.99 5 9.5S7.01 5 9.5 5 14 7.01 14 9.5 11.99 14 9.5 14z" />
            </svg>
            <input
              type="search"
              className="input"
              value={search.query}
              placeholder="Search events (Enter: next)"
              aria-label="Search events in the whole trace"
              onChange={(e) => {
                const next = e.target.value
                // A new query: the old matches no longer apply.
                setSearch(next.trim() === search.query.trim() ? { ...search, query: next } : { ...NO_SEARCH, query: next, status: next.trim() ? 'pending' : 'idle' })
              }}
              onKeyDown={onSearchKey}
              disabled={!ready}
              spellCheck={false}
              data-testid="trace-search"
            />
          </div>
          <span className="trace-search-count mono" data-testid="trace-search-count" aria-live="polite">
            {search.status === 'pending'
              ? '…'
              : search.status === 'error'
                ? 'error'
                : search.status === 'ok'
                  ? total === 0
                    ? 'no match'
                    : `${search.index >= 0 ? (search.index + 1).toLocaleString('en-US') : '–'} / ${total.toLocaleString('en-US')}`
                  : ''}
          </span>
          <button type="button" className="icon-button" onClick={() => void step(-1)} disabled={!total} aria-label="Previous match" title="Previous match (Shift+Enter)" data-testid="trace-search-prev">
            <span className="chevron up" />
          </button>
          <button type="button" className="icon-button" onClick={() => void step(1)} disabled={!total} aria-label="Next match" title="Next match (Enter)" data-testid="trace-search-next">
            <span className="chevron" />
          </button>
        </div>
        <div className="spacer" />
        <a className="button compact" href={downloadUrl} download data-testid="trace-download" title="Download the raw trace file">
          <svg viewBox="0 0 24 24" aria-hidden="true" className="button-icon">
            <path d="M5 20h14v-2H5v2zM19 9h-4V3H9v6H5l7 7 7-7z" />
          </svg>
          Download trace
        </a>
        <button type="button" className="button compact" onClick={onPerfetto} disabled={!ready} data-testid="trace-perfetto" title="Open this trace in ui.perfetto.dev (a new tab; the trace is sent to that page, in your browser)">
          Open in Perfetto
        </button>
      </div>
      {perfetto.text && (
        <div className={`trace-note${perfetto.error ? ' error' : ''}`} role="status" data-testid="trace-perfetto-status">
          {perfetto.text}
        </div>
      )}
      {frameError && <ErrorBanner error={frameError} what="this part of the trace" />}
      {search.status === 'error' && search.error && <ErrorBanner error={search.error} what="the search results" />}
      <div className="trace-body">
        <div className="trace-canvas-root" ref={rootRef} tabIndex={0} data-testid="trace-canvas-root" aria-label="Trace timeline. Wheel or W/S to zoom, drag or A/D to pan, click an event for its details.">
          <div className="trace-scroll" ref={scrollerRef}>
            <canvas className="trace-canvas" ref={canvasRef} data-testid="trace-canvas" />
            <div ref={spacerRef} />
          </div>
          <div className="trace-tip" ref={tooltipRef} hidden data-testid="trace-tooltip" />
          <div className="trace-loading-bar" aria-hidden="true" />
          {first.status !== 'ok' && (
            <div className="trace-overlay">
              {first.status === 'error' ? <ErrorBanner error={first.error} what="the timeline" /> : <Loading progress={first.progress} label="Loading the timeline" />}
            </div>
          )}
          {first.status === 'ok' && first.empty && (
            <div className="trace-overlay">
              <Banner kind="info" title="This trace has no events to draw" />
            </div>
          )}
        </div>
        <div className="trace-status">
          <span className="trace-info" ref={infoRef} data-testid="trace-info" />
          <span className="trace-hint">Wheel/W S: zoom · Drag/A D: pan · Shift+drag (or drag on the ruler): select a range · Shift+wheel: scroll · Double-click: fit</span>
        </div>
        {range && (
          <RangePanel
            selection={selection}
            range={range}
            onClose={() => {
              setRange(null)
              engineRef.current?.clearRange()
            }}
          />
        )}
        <DetailsPanel
          state={details}
          tracks={first.status === 'ok' ? first.tracks : []}
          traceStart={traceStart}
          onJump={jump}
          onClose={closeDetails}
          onZoom={() => engineRef.current?.focusSelection()}
        />
      </div>
    </div>
  )
}
