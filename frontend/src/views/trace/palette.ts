// Stable event colors: a name is hashed (FNV-1a) to one of PALETTE_SIZE slots, so the same
// operator or kernel has the same color at every zoom, in every window and across reloads.
// Each slot has a light-theme and a dark-theme variant with the same hue; the label color is
// chosen per variant for contrast. Step markers ("ProfilerStep#12") hash without their number so
// all steps share one color.

import type { Theme } from '../../theme'

const HUES = [4, 22, 38, 52, 78, 105, 135, 160, 178, 192, 205, 218, 232, 250, 268, 285, 300, 318, 335, 350]
export const PALETTE_SIZE = HUES.length * 2

export function colorIndex(name: string): number {
  const key = name.replace(/#\d+$/, '')
  let h = 0x811c9dc5
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return (h >>> 0) % PALETTE_SIZE
}

export interface Palette {
  fill: string[]
  /** Fill of an event dimmed by an active search that it does not match. */
  dim: string[]
  text: string[]
}

function hsl(h: number, s: number, l: number): string {
  return `hsl(${h} ${s}% ${l}%)`
}

function build(theme: Theme): Palette {
  const fill: string[] = []
  const dim: string[] = []
  const text: string[] = []
  for (let i = 0; i < PALETTE_SIZE; i++) {
    const hue = HUES[i % HUES.length]
    const variant = i >= HUES.length ? 1 : 0
    if (theme === 'dark') {
      // Hues around yellow/green look brighter at equal lightness: darken them a little.
      const l = (hue > 40 && hue < 190 ? 33 : 40) + variant * 6
      fill.push(hsl(hue, variant ? 38 : 48, l))
      dim.push(hsl(hue, 10, 24))
      text.push('#eef0f2')
    } else {
      const l = (hue > 40 && hue < 190 ? 70 : 76) - variant * 7
      fill.push(hsl(hue, variant ? 50 : 62, l))
      dim.push(hsl(hue, 14, 90))
      text.push('#1b1c1e')
    }
  }
  return { fill, dim, text }
}

const cache: Partial<Record<Theme, Palette>> = {}

export function palette(theme: Theme): Palette {
  return (cache[theme] ??= build(theme))
}
