// The Trace view's track list menu: pin, hide, reorder and collapse tracks. What it changes is
// the arrangement of trackList.ts, kept in the URL; the canvas lays the tracks out from it.

import type { TrackInfo } from './api'
import { groupKey, isEmptyTrack, moveGroup, orderGroups, showAll, toggleCollapsed, toggleHidden, togglePin, type TrackList } from './trackList'

interface Group {
  key: string
  label: string
  tracks: TrackInfo[]
}

function groupsOf(tracks: TrackInfo[]): Group[] {
  const groups = new Map<string, Group>()
  for (const t of tracks) {
    if (!t || isEmptyTrack(t)) continue
    const key = groupKey(t.kind, t.process)
    let g = groups.get(key)
    if (!g) {
      g = { key, label: t.process || '(no process)', tracks: [] }
      groups.set(key, g)
    }
    g.tracks.push(t)
  }
  return [...groups.values()]
}

export function TrackMenu({ tracks, list, onChange, disabled }: { tracks: TrackInfo[]; list: TrackList; onChange: (list: TrackList) => void; disabled: boolean }) {
  const groups = groupsOf(tracks)
  const present = groups.map((g) => g.key)
  const ordered = orderGroups(present, list.order).map((k) => groups.find((g) => g.key === k) as Group)
  const hidden = list.hidden.filter((id) => tracks[id] && !isEmptyTrack(tracks[id])).length
  const empty = tracks.filter((t) => t && isEmptyTrack(t)).length
  return (
    <details className="trace-tracks" data-testid="trace-tracks">
      <summary className={`button compact${disabled ? ' disabled' : ''}`} title="Pin, hide, reorder and collapse tracks">
        Tracks{hidden ? ` · ${hidden} hidden` : ''}
      </summary>
      <div className="trace-tracks-panel" role="dialog" aria-label="Tracks">
        <div className="trace-tracks-head">
          <span className="muted" data-testid="trace-tracks-note" title="Tracks without events, and the (no pid) lane of global markers such as Record Window End">
            {empty ? `${empty} empty track${empty === 1 ? '' : 's'} not shown` : 'Pinned tracks are shown first'}
          </span>
          <button type="button" className="link-button" disabled={!hidden} onClick={() => onChange(showAll(list))} data-testid="trace-tracks-show-all">
            Show all
          </button>
        </div>
        {ordered.map((g, i) => (
          <div className="trace-tracks-group" key={g.key} data-group={g.key} data-testid="trace-tracks-group">
            <div className="trace-tracks-row group">
              <label className="trace-tracks-name" title={g.label}>
                <input type="checkbox" checked={!list.collapsed.includes(g.key)} onChange={() => onChange(toggleCollapsed(list, g.key))} aria-label={`Expand ${g.label}`} />
                <strong>{g.label}</strong>
              </label>
              <button type="button" className="icon-button" disabled={i === 0} onClick={() => onChange(moveGroup(list, present, g.key, -1))} aria-label={`Move ${g.label} up`} data-testid="trace-tracks-up">
                <span className="chevron up" />
              </button>
              <button type="button" className="icon-button" disabled={i === ordered.length - 1} onClick={() => onChange(moveGroup(list, present, g.key, 1))} aria-label={`Move ${g.label} down`} data-testid="trace-tracks-down">
                <span className="chevron" />
              </button>
            </div>
            {g.tracks.map((t) => {
              const pinned = list.pinned.includes(t.id)
              const isHidden = list.hidden.includes(t.id)
              return (
                <div className={`trace-tracks-row${isHidden ? ' is-hidden' : ''}`} key={t.id} data-track={t.id}>
                  <span className="trace-tracks-name" title={`${t.thread} · ${t.event_count.toLocaleString('en-US')} events`}>
                    {t.thread || t.tid}
                  </span>
                  <button type="button" className={`trace-chip${pinned ? ' on' : ''}`} aria-pressed={pinned} onClick={() => onChange(togglePin(list, t.id))} data-testid="trace-track-pin">
                    {pinned ? 'Pinned' : 'Pin'}
                  </button>
                  <button type="button" className={`trace-chip${isHidden ? ' on' : ''}`} aria-pressed={isHidden} onClick={() => onChange(toggleHidden(list, t.id))} data-testid="trace-track-hide">
                    {isHidden ? 'Hidden' : 'Hide'}
                  </button>
                </div>
              )
            })}
          </div>
        ))}
      </div>
    </details>
  )
}
