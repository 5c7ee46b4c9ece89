// The Trace view's hover tooltip: a DOM element over the canvas (text stays selectable and
// sharp), filled from a hit and placed next to the pointer, inside the canvas.

import { counterAt, type Frames, type Hit } from './hit'
import { fmtCounter, fmtDuration, fmtTime } from './timefmt'

export interface TipContent {
  title: string
  lines: [string, string][]
}

/** What the tooltip says about `hit`, or null for nothing to say. */
export function describe(hit: Hit, frames: Frames): TipContent | null {
  const lines: [string, string][] = []
  let title = ''
  if (hit?.type === 'event') {
    const { row, index, frame } = hit
    title = frame.names[row.evName[index]] ?? ''
    lines.push(['Duration', fmtDuration(row.evEnd[index] - row.evStart[index])])
    lines.push(['Start', fmtTime(row.evStart[index])])
    lines.push(['Thread', hit.track.thread || hit.track.tid])
  } else if (hit?.type === 'block') {
    const { row, index } = hit
    title = `${row.blCount[index].toLocaleString('en-US')} events`
    lines.push(['Range', fmtDuration(row.blEnd[index] - row.blStart[index])])
    lines.push(['', 'Too small to draw one by one; click or zoom in'])
  } else if (hit?.type === 'counter') {
    const c = counterAt(frames, hit.name, hit.t)
    title = hit.name
    lines.push(['Value', c === null ? '–' : fmtCounter(c, hit.unit)])
    lines.push(['At', fmtTime(hit.t)])
  } else if (hit?.type === 'group') {
    title = hit.item.label
    lines.push(['', `${hit.item.detail} · click to ${hit.item.collapsed ? 'expand' : 'collapse'}`])
  }
  return title ? { title, lines } : null
}

export class Tooltip {
  private key = ''
  private readonly el: HTMLElement

  constructor(el: HTMLElement) {
    this.el = el
  }

  /** Shows `content` next to the pointer at canvas (x, y), within a w x h canvas. */
  show(content: TipContent, pointer: { x: number; y: number }, w: number, h: number): void {
    const tip = this.el
    const { title, lines } = content
    const key = `${title}\u0000${lines.join('\u0000')}`
    if (key !== this.key || tip.hidden) {
      this.key = key
      this.fill(content)
      tip.hidden = false
    }
    this.place(pointer, w, h)
  }

  hide(): void {
    if (!this.el.hidden) this.el.hidden = true
    this.key = ''
  }

  private fill({ title, lines }: TipContent): void {
    const tip = this.el
    tip.replaceChildren()
    const head = document.createElement('div')
    head.className = 'trace-tip-title'
    head.textContent = title
    tip.appendChild(head)
    for (const [k, v] of lines) {
      const row = document.createElement('div')
      row.className = 'trace-tip-row'
      if (k) {
        const key = document.createElement('span')
        key.className = 'trace-tip-key'
        key.textContent = k
        row.appendChild(key)
      }
      const val = document.createElement('span')
      val.textContent = v
      row.appendChild(val)
      tip.appendChild(row)
    }
  }

  private place(m: { x: number; y: number }, w: number, h: number): void {
    const tip = this.el
    const tw = tip.offsetWidth
    const th = tip.offsetHeight
    let left = m.x + 14
    let top = m.y + 16
    if (left + tw > w - 4) left = Math.max(4, m.x - tw - 10)
    if (top + th > h - 4) top = Math.max(4, m.y - th - 10)
    tip.style.transform = `translate(${Math.round(left)}px, ${Math.round(top)}px)`
  }
}
