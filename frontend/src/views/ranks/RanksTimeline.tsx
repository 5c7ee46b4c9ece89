// All ranks on one timeline (the Distributed view's Timeline mode): chosen ranks' GPU streams
// (and host threads) stacked on the run clock by `/ranks`, each rank shifted by its clock offset
// (estimated from collective ends, overridable here), drawn by the Trace view's engine (viewport,
// LOD loader, painter, input: reused as they are) with the matched collectives as links.

import { useEffect, useRef, useState } from 'react'
import { Banner, ErrorBanner, Loading } from '../../components/ui'
import { useViewStyle } from '../../components/style'
import type { Theme } from '../../theme'
import { TraceEngine } from '../trace/engine'
import traceCss from '../trace/trace.css?inline'
import { fetchRanks, ranksUrl, type RankLane, type RanksPayload, type RanksQuery } from './api'
import css from './ranks.css?inline'

export const MAX_RANKS = 8

/** A rank the user can stack, with the offset `/distributed` estimated for it. */
export interface RankChoice {
  rank: number
  worker: string
}

type First = { status: 'pending'; progress: number | null } | { status: 'ok' } | { status: 'error'; error: Error }

export function RanksTimeline({ run, span, choices, theme }: { run: string; span: string; choices: RankChoice[]; theme: Theme }) {
  useViewStyle('trace', traceCss)
  useViewStyle('ranks', css)
  const [chosen, setChosen] = useState<number[]>(() => choices.slice(0, MAX_RANKS).map((c) => c.rank))
  const [host, setHost] = useState(false)
  const [links, setLinks] = useState(true)
  const [overrides, setOverrides] = useState<Record<number, number>>({})
  const query: RanksQuery = { run, span, ranks: chosen, host, offsets: overrides }
  const toggle = (rank: number) =>
    setChosen((now) => (now.includes(rank) ? now.filter((r) => r !== rank) : now.length >= MAX_RANKS ? now : [...now, rank].sort((a, b) => a - b)))
  return (
    <div className="ranks-timeline" data-testid="ranks-view">
      <div className="ranks-toolbar">
        <fieldset className="ranks-picker" data-testid="ranks-picker">
          <legend>Ranks (at most {MAX_RANKS})</legend>
          {choices.map((c) => (
            <label key={c.worker} title={c.worker}>
              <input type="checkbox" checked={chosen.includes(c.rank)} disabled={!chosen.includes(c.rank) && chosen.length >= MAX_RANKS} onChange={() => toggle(c.rank)} data-testid={`ranks-pick-${c.rank}`} />
              {c.rank}
            </label>
          ))}
        </fieldset>
        <label className="ranks-switch">
          <input type="checkbox" checked={host} onChange={(e) => setHost(e.target.checked)} data-testid="ranks-host" /> Host threads
        </label>
        <label className="ranks-switch">
          <input type="checkbox" checked={links} onChange={(e) => setLinks(e.target.checked)} data-testid="ranks-links" /> Collective links
        </label>
      </div>
      {chosen.length === 0 ? (
        <Banner kind="info" title="Choose at least one rank" />
      ) : (
        <RanksSession key={`${chosen.join(',')}\u0000${host}\u0000${JSON.stringify(overrides)}`} query={query} links={links} theme={theme} overrides={overrides} setOverrides={setOverrides} />
      )}
    </div>
  )
}

function RanksSession({ query, links, theme, overrides, setOverrides }: { query: RanksQuery; links: boolean; theme: Theme; overrides: Record<number, number>; setOverrides: (o: Record<number, number>) => void }) {
  const rootRef = useRef<HTMLDivElement>(null)
  const scrollerRef = useRef<HTMLDivElement>(null)
  const canvasRef = useRef<HTMLCanvasElement>(null)
  const spacerRef = useRef<HTMLDivElement>(null)
  const tooltipRef = useRef<HTMLDivElement>(null)
  const infoRef = useRef<HTMLSpanElement>(null)
  const engineRef = useRef<TraceEngine | null>(null)
  const themeRef = useRef(theme)
  themeRef.current = theme
  const linksRef = useRef(links)
  linksRef.current = links
  const [first, setFirst] = useState<First>({ status: 'pending', progress: null })
  const [frameError, setFrameError] = useState<Error | null>(null)
  const [payload, setPayload] = useState<Pick<RanksPayload, 'lanes' | 'links'> | null>(null)
  const queryRef = useRef(query)

  useEffect(() => {
    const [root, scroller, canvas, spacer, tooltip] = [rootRef.current, scrollerRef.current, canvasRef.current, spacerRef.current, tooltipRef.current]
    if (!root || !scroller || !canvas || !spacer || !tooltip) return
    const q = queryRef.current
    const engine = new TraceEngine(
      { root, scroller, canvas, spacer, tooltip, info: infoRef.current },
      { run: q.run, worker: '', span: q.span },
      themeRef.current,
      {
        onFirstFrame: (state) => setFirst(state.status === 'ok' ? { status: 'ok' } : state),
        onSelect: () => undefined,
        onFrameError: setFrameError,
        onRange: () => undefined,
        onTrackList: () => undefined,
      },
      null,
      { url: (win) => ranksUrl(q, win), fetchJson: fetchRanks((p) => setPayload({ lanes: p.lanes, links: p.links })) },
    )
    engine.setFlows(linksRef.current, new Set())
    engineRef.current = engine
    return () => {
      engine.destroy()
      engineRef.current = null
    }
  }, [])

  useEffect(() => {
    engineRef.current?.setTheme(theme)
  }, [theme])

  useEffect(() => {
    engineRef.current?.setFlows(links, new Set())
  }, [links])

  return (
    <div className="ranks-session">
      {payload && <OffsetTable lanes={payload.lanes} overrides={overrides} setOverrides={setOverrides} />}
      {frameError && <ErrorBanner error={frameError} what="this part of the timeline" />}
      <div className="trace-body ranks-body">
        <div className="trace-canvas-root" ref={rootRef} tabIndex={0} data-testid="ranks-canvas-root" data-links={payload?.links.total ?? ''} aria-label="All ranks on one timeline. Wheel or W/S to zoom, drag or A/D to pan.">
          <div className="trace-scroll" ref={scrollerRef}>
            <canvas className="trace-canvas" ref={canvasRef} data-testid="ranks-canvas" />
            <div ref={spacerRef} />
          </div>
          <div className="trace-tip" ref={tooltipRef} hidden data-testid="ranks-tooltip" />
          <div className="trace-loading-bar" aria-hidden="true" />
          {first.status !== 'ok' && <div className="trace-overlay">{first.status === 'error' ? <ErrorBanner error={first.error} what="the multi-rank timeline" /> : <Loading progress={first.progress} label="Loading the ranks" />}</div>}
        </div>
        <div className="trace-status">
          <span className="trace-info" ref={infoRef} data-testid="ranks-info" />
          <span className="trace-hint">
            Run clock: each rank's trace time minus its offset · {payload ? `${payload.links.total} collectives in view${payload.links.capped ? ' (sampled)' : ''}` : ''} · Wheel/W S: zoom · Drag/A D: pan
          </span>
        </div>
      </div>
    </div>
  )
}

function OffsetTable({ lanes, overrides, setOverrides }: { lanes: RankLane[]; overrides: Record<number, number>; setOverrides: (o: Record<number, number>) => void }) {
  const [draft, setDraft] = useState<Record<number, string>>({})
  const apply = () => {
    const next: Record<number, number> = { ...overrides }
    for (const [rank, text] of Object.entries(draft)) {
      const value = Number(text)
      if (text.trim() === '') delete next[Number(rank)]
      else if (Number.isFinite(value)) next[Number(rank)] = value
    }
    setOverrides(next)
  }
  return (
    <table className="ranks-offsets" data-testid="ranks-offsets">
      <thead>
        <tr>
          <th>Rank</th>
          <th>Worker</th>
          <th title="The rank's clock minus the run's, estimated from collective ends (everyone leaves a collective together)">Estimated offset (us)</th>
          <th title="The offset used: the rank's events are drawn this much earlier">Offset used (us)</th>
          <th>Override (us)</th>
        </tr>
      </thead>
      <tbody>
        {lanes.map((lane) => (
          <tr key={lane.worker} data-testid="ranks-lane" data-rank={lane.rank} data-offset={lane.offset_us} className={lane.overridden ? 'overridden' : ''}>
            <td className="mono">{lane.rank}</td>
            <td>{lane.worker}</td>
            <td className="num mono">{lane.estimated_offset_us.toFixed(3)}</td>
            <td className="num mono">{lane.offset_us.toFixed(3)}</td>
            <td>
              <input
                className="ranks-offset-input mono"
                type="text"
                inputMode="decimal"
                placeholder={lane.overridden ? String(lane.offset_us) : 'estimate'}
                value={draft[lane.rank] ?? ''}
                onChange={(e) => setDraft({ ...draft, [lane.rank]: e.target.value })}
                onKeyDown={(e) => {
                  if (e.key === 'Enter') apply()
                }}
                data-testid={`ranks-offset-${lane.rank}`}
                aria-label={`Offset of rank ${lane.rank}, us`}
              />
            </td>
          </tr>
        ))}
      </tbody>
      <tfoot>
        <tr>
          <td colSpan={5}>
            <button type="button" className="button compact" onClick={apply} data-testid="ranks-apply">
              Apply offsets
            </button>{' '}
            <button type="button" className="button compact" disabled={Object.keys(overrides).length === 0} onClick={() => setOverrides({})} data-testid="ranks-reset">
              Use the estimates
            </button>
          </td>
        </tr>
      </tfoot>
    </table>
  )
}
