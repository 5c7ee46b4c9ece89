// Input of the Trace view: the wheel (zoom at the pointer, horizontal pan, track scroll), the
// pointer (drag to pan, click to select, hover), and W/A/S/D (zoom and pan, held keys keep
// moving, one step per animation frame). Turns events into view windows through viewport.ts
// and hands them to the engine (InputHost); it keeps only the gesture in progress.

import type { EventRef, Hit } from './hit'
import { refOf } from './hit'
import { HEADER_H } from './layout'
import { blockWindow, panByPx, wheelZoomFactor, zoomAround, type TimeWindow, type Viewport } from './viewport'

export interface InputHost {
  /** The first frame is loaded (nothing to zoom or pan before). */
  readonly ready: boolean
  readonly viewport: Viewport
  /** Canvas height (CSS px): a page of wheel scroll. */
  readonly height: number
  readonly hasSelection: boolean
  setView(window: TimeWindow): void
  hitTest(x: number, y: number): Hit
  toggleGroup(key: string): void
  /** A click picked `ref` (null: cleared the selection). */
  pick(ref: EventRef | null): void
  fit(): void
  focusSelection(): void
  /** The pointer moved or left (hover and crosshair follow), or the tracks scrolled. */
  redraw(): void
  /** A drag began: no tooltip while dragging. */
  dragStarted(): void
  /** Shift+drag, or a drag on the time ruler: a range from (x0, y0) to (x1, y1), canvas px;
   * `allTracks` when it began on the ruler. `done` when the button is released. */
  selectRange(x0: number, y0: number, x1: number, y1: number, allTracks: boolean, done: boolean): void
  resize(): void
}

interface Drag {
  x: number
  y: number
  viewport: Viewport
  scrollTop: number
  moved: boolean
  /** Selects a time range instead of panning (Shift held, or begun on the ruler). */
  range: boolean
}

export class Input {
  /** The pointer over the canvas (canvas CSS px), null when outside. */
  pointer: { x: number; y: number } | null = null
  private drag: Drag | null = null
  private readonly keys = new Set<string>()
  private keyAnim = 0
  private keyLast = 0
  private resizeObserver: ResizeObserver | null = null
  private readonly cleanups: (() => void)[] = []
  private readonly host: InputHost
  private readonly els: { root: HTMLElement; scroller: HTMLElement; canvas: HTMLCanvasElement }

  constructor(host: InputHost, els: { root: HTMLElement; scroller: HTMLElement; canvas: HTMLCanvasElement }) {
    this.host = host
    this.els = els
    this.attach()
  }

  /** A drag that has moved the view (hover, tooltip and crosshair are off meanwhile). */
  get dragging(): boolean {
    return Boolean(this.drag?.moved)
  }

  destroy(): void {
    cancelAnimationFrame(this.keyAnim)
    this.keyAnim = 0
    this.keys.clear()
    this.resizeObserver?.disconnect()
    for (const off of this.cleanups) off()
  }

  private attach(): void {
    const on = <K extends keyof HTMLElementEventMap>(el: HTMLElement | Window, type: K, fn: (e: HTMLElementEventMap[K]) => void, opts?: AddEventListenerOptions) => {
      el.addEventListener(type, fn as EventListener, opts)
      this.cleanups.push(() => el.removeEventListener(type, fn as EventListener, opts))
    }
    const { canvas: c, scroller } = this.els
    on(c, 'wheel', (e) => this.onWheel(e), { passive: false })
    on(c, 'pointerdown', (e) => this.onPointerDown(e))
    on(c, 'pointermove', (e) => this.onPointerMove(e))
    on(c, 'pointerup', (e) => this.onPointerUp(e))
    on(c, 'pointercancel', () => {
      this.drag = null
    })
    on(c, 'pointerleave', () => {
      if (this.drag) return
      this.pointer = null
      this.host.redraw()
    })
    on(c, 'dblclick', (e) => {
      if (e.offsetX >= this.host.viewport.left) this.host.fit()
    })
    on(scroller, 'scroll', () => this.host.redraw(), { passive: true })
    on(window, 'keydown', (e) => this.onKey(e, true))
    on(window, 'keyup', (e) => this.onKey(e, false))
    on(window, 'blur', () => this.keys.clear())
    if (typeof ResizeObserver !== 'undefined') {
      this.resizeObserver = new ResizeObserver(() => this.host.resize())
      this.resizeObserver.observe(scroller)
    } else {
      on(window, 'resize', () => this.host.resize())
    }
  }

  private pos(e: MouseEvent): { x: number; y: number } {
    const r = this.els.canvas.getBoundingClientRect()
    return { x: e.clientX - r.left, y: e.clientY - r.top }
  }

  private onWheel(e: WheelEvent): void {
    const host = this.host
    if (!host.ready) return
    e.preventDefault()
    // deltaMode: 0 px, 1 lines (about 16 px), 2 pages.
    const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? host.height : 1
    const dx = e.deltaX * unit
    const dy = e.deltaY * unit
    const { x } = this.pos(e)
    const v = host.viewport
    if (e.shiftKey || (x < v.left && !e.ctrlKey)) {
      // Shift+wheel, or the wheel over the track names: scroll the tracks.
      this.els.scroller.scrollTop += dy || dx
      return
    }
    if (Math.abs(dx) > Math.abs(dy)) {
      host.setView(panByPx(v, dx))
      return
    }
    host.setView(zoomAround(v, Math.max(v.left, x), wheelZoomFactor(dy, e.ctrlKey)))
  }

  private onPointerDown(e: PointerEvent): void {
    if (e.button !== 0) return
    const p = this.pos(e)
    const range = this.host.ready && p.x >= this.host.viewport.left && (e.shiftKey || p.y < HEADER_H)
    this.drag = { x: p.x, y: p.y, viewport: this.host.viewport, scrollTop: this.els.scroller.scrollTop, moved: false, range }
    try {
      this.els.canvas.setPointerCapture(e.pointerId)
    } catch {
      // synthetic or already released pointer: dragging still works while over the canvas
    }
  }

  private onPointerMove(e: PointerEvent): void {
    const p = this.pos(e)
    this.pointer = p
    const d = this.drag
    if (d) {
      const dx = p.x - d.x
      const dy = p.y - d.y
      if (!d.moved && Math.abs(dx) + Math.abs(dy) > 3) {
        // 3 px of slack: a click with a shaky hand stays a click.
        d.moved = true
        this.els.root.classList.add('is-dragging')
        this.host.dragStarted()
      }
      if (d.moved && d.range) {
        this.host.selectRange(d.x, d.y, p.x, p.y, d.y < HEADER_H, false)
        return
      }
      if (d.moved) {
        this.host.setView(panByPx(d.viewport, -dx))
        this.els.scroller.scrollTop = d.scrollTop - dy
        return
      }
    }
    this.host.redraw() // the hover (outline, tooltip) follows in the frame drawn next
  }

  private onPointerUp(e: PointerEvent): void {
    const d = this.drag
    const { root, canvas } = this.els
    this.drag = null
    root.classList.remove('is-dragging')
    if (canvas.hasPointerCapture?.(e.pointerId)) canvas.releasePointerCapture(e.pointerId)
    if (d?.moved && d.range) {
      const p = this.pos(e)
      this.host.selectRange(d.x, d.y, p.x, p.y, d.y < HEADER_H, true)
      return
    }
    if (!d || d.moved) return
    root.focus({ preventScroll: true })
    const p = this.pos(e)
    const hit = this.host.hitTest(p.x, p.y)
    if (hit?.type === 'group') {
      this.host.toggleGroup(hit.item.key)
      return
    }
    if (hit?.type === 'event') {
      this.host.pick(refOf(hit))
      return
    }
    if (hit?.type === 'block') {
      // A merged block: zoom in until its events separate.
      this.host.setView(blockWindow(hit.row.blStart[hit.index], hit.row.blEnd[hit.index]))
      return
    }
    if (p.x >= this.host.viewport.left && p.y >= HEADER_H) this.host.pick(null)
  }

  private onKey(e: KeyboardEvent, down: boolean): void {
    if (!down) {
      this.keys.delete(e.key.toLowerCase())
      return
    }
    if (e.ctrlKey || e.metaKey || e.altKey) return
    const target = e.target as HTMLElement | null
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) return
    if (!this.host.ready || !this.els.root.isConnected) return
    const key = e.key.toLowerCase()
    if (key === 'escape' && this.host.hasSelection) {
      this.host.pick(null)
      return
    }
    if (key === 'f') {
      this.host.focusSelection()
      return
    }
    if (!'wasd'.includes(key) || key.length !== 1) return
    e.preventDefault()
    if (e.repeat || this.keys.has(key)) return
    this.keys.add(key)
    this.keyStep(key, 0.12) // a tap moves by a visible step; holding keeps moving
    this.keyLast = performance.now() + 120
    if (!this.keyAnim) this.keyAnim = requestAnimationFrame((t) => this.keyLoop(t))
  }

  /** Moves by `amount` (0.12 for a tap, the seconds elapsed while held). */
  private keyStep(key: string, amount: number): void {
    const v = this.host.viewport
    if (key === 'a' || key === 'd') {
      const shift = (key === 'd' ? 1 : -1) * (v.end - v.start) * amount * 1.2
      this.host.setView([v.start + shift, v.end + shift])
      return
    }
    const factor = key === 'w' ? Math.exp(-amount * 2.2) : Math.exp(amount * 2.2)
    // Zoom at the pointer when it is over the tracks, else at the middle.
    const m = this.pointer
    const anchorX = m && m.x >= v.left ? m.x : v.left + v.width / 2
    this.host.setView(zoomAround(v, anchorX, factor))
  }

  private keyLoop(now: number): void {
    this.keyAnim = 0
    if (this.keys.size === 0) return
    // At most 50 ms per frame: a stalled tab does not jump the view when it resumes.
    const dt = Math.min(0.05, Math.max(0, now - this.keyLast) / 1000)
    if (now > this.keyLast) {
      for (const key of this.keys) this.keyStep(key, dt)
      this.keyLast = now
    }
    this.keyAnim = requestAnimationFrame((t) => this.keyLoop(t))
  }
}
