// What every part of the Trace view's painter shares: the 2D context, the theme's colors (read
// from the page's CSS variables), the event palette, fonts, cached text widths, the hatch pattern
// of merged blocks, and batched rectangle fills.

import type { Theme } from '../../theme'
import { palette, type Palette } from './palette'

export const FONT = '11px Roboto, system-ui, "Helvetica Neue", Arial, sans-serif'
export const FONT_BOLD = '500 12px Roboto, system-ui, "Helvetica Neue", Arial, sans-serif'
export const FONT_SMALL = '10.5px Roboto, system-ui, "Helvetica Neue", Arial, sans-serif'

export interface Colors {
  bg: string
  surface2: string
  header: string
  border: string
  text: string
  muted: string
  faint: string
  accent: string
  link: string
  stepShade: string
  grid: string
  hatch: string
  hatchBg: string
  selection: string
}

function readColors(theme: Theme): Colors {
  const css = getComputedStyle(document.documentElement)
  const v = (name: string, fallback: string) => css.getPropertyValue(name).trim() || fallback
  const dark = theme === 'dark'
  return {
    bg: v('--surface', dark ? '#292a2d' : '#ffffff'),
    surface2: v('--surface-2', dark ? '#2d2e31' : '#fafafa'),
    header: dark ? '#323337' : '#f1f3f4',
    border: v('--border', dark ? '#3c4043' : '#e0e0e0'),
    text: v('--text', dark ? '#e8eaed' : '#212121'),
    muted: v('--muted', dark ? '#a9adb1' : '#616161'),
    faint: v('--faint', dark ? '#7b7f84' : '#9e9e9e'),
    accent: v('--accent', dark ? '#ff9800' : '#f57c00'),
    link: v('--link', dark ? '#8ab4f8' : '#1565c0'),
    stepShade: dark ? 'rgba(255,255,255,0.035)' : 'rgba(0,0,0,0.028)',
    grid: dark ? 'rgba(255,255,255,0.07)' : 'rgba(0,0,0,0.07)',
    hatch: dark ? 'rgba(255,255,255,0.22)' : 'rgba(0,0,0,0.2)',
    hatchBg: dark ? '#45474b' : '#d5d7da',
    selection: dark ? '#ffffff' : '#000000',
  }
}

/**
 * Rectangles collected per fill style and filled with one path each: one fillStyle change and
 * one fill() per color instead of per rectangle (speedscope's canvas-2d batch renderers).
 */
export class RectBatch {
  private readonly rects = new Map<string | CanvasPattern, number[]>()

  add(style: string | CanvasPattern, x: number, y: number, w: number, h: number): void {
    let list = this.rects.get(style)
    if (!list) {
      list = []
      this.rects.set(style, list)
    }
    list.push(x, y, w, h)
  }

  /** Fills everything collected, in the order the styles were first used, and empties. */
  flush(ctx: CanvasRenderingContext2D): void {
    for (const [style, r] of this.rects) {
      ctx.fillStyle = style
      ctx.beginPath()
      for (let i = 0; i < r.length; i += 4) ctx.rect(r[i], r[i + 1], r[i + 2], r[i + 3])
      ctx.fill()
    }
    this.rects.clear()
  }
}

export class PaintKit {
  colors: Colors
  pal: Palette
  private theme: Theme
  private hatch: CanvasPattern | null = null
  private readonly textWidth = new Map<string, number>()

  readonly ctx: CanvasRenderingContext2D

  constructor(ctx: CanvasRenderingContext2D, theme: Theme) {
    this.ctx = ctx
    this.theme = theme
    this.pal = palette(theme)
    this.colors = readColors(theme)
  }

  get dark(): boolean {
    return this.theme === 'dark'
  }

  /** Re-reads the CSS variables (the shell writes data-theme after the engine hears of it). */
  setTheme(theme: Theme): void {
    this.theme = theme
    this.pal = palette(theme)
    this.colors = readColors(theme)
    this.hatch = null
  }

  /** The pattern depends on the canvas' scale: make a new one after a resize. */
  resetPattern(): void {
    this.hatch = null
  }

  hatchPattern(): CanvasPattern | string {
    if (this.hatch) return this.hatch
    const size = 6
    const tile = document.createElement('canvas')
    tile.width = size
    tile.height = size
    const g = tile.getContext('2d')
    if (!g) return this.colors.hatchBg
    g.fillStyle = this.colors.hatchBg
    g.fillRect(0, 0, size, size)
    g.strokeStyle = this.colors.hatch
    g.lineWidth = 1.5
    g.beginPath()
    g.moveTo(-1, size + 1)
    g.lineTo(size + 1, -1)
    g.moveTo(-1, 1)
    g.lineTo(1, -1)
    g.moveTo(size - 1, size + 1)
    g.lineTo(size + 1, size - 1)
    g.stroke()
    this.hatch = this.ctx.createPattern(tile, 'repeat')
    return this.hatch ?? this.colors.hatchBg
  }

  measure(text: string): number {
    let w = this.textWidth.get(text)
    if (w === undefined) {
      w = this.ctx.measureText(text).width
      if (this.textWidth.size > 20000) this.textWidth.clear()
      this.textWidth.set(text, w)
    }
    return w
  }

  /** Draws `text` left-aligned in `avail` px, cut with an ellipsis; nothing if too narrow. */
  label(text: string, x: number, y: number, avail: number): void {
    if (avail < 8 || !text) return
    const full = this.measure(text)
    if (full <= avail) {
      this.ctx.fillText(text, x, y)
      return
    }
    const chars = Math.floor((text.length * (avail - 8)) / full)
    if (chars < 2) return
    this.ctx.fillText(`${text.slice(0, chars)}…`, x, y)
  }
}
