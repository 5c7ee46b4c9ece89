// Number formatting of every view but Trace (views/trace/timefmt.ts has its own scales, with the
// same unit per magnitude: us, ms, s),
// locale-independent (en-US grouping) so what the page shows is predictable; '–' marks a missing value.

const intFmt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 })
const fixed2 = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })
const upTo2 = new Intl.NumberFormat('en-US', { maximumFractionDigits: 2 })

function missing(value: number | null | undefined): value is null | undefined {
  return value === null || value === undefined || !Number.isFinite(value)
}

/** Microseconds as an integer with thousands separators: 12,345. */
export function us(value: number | null | undefined): string {
  if (missing(value)) return '–'
  return intFmt.format(Math.round(value))
}

/** A duration in us with a unit that reads well: "850 us", "12.35 ms", "1.20 s". */
export function duration(value: number | null | undefined): string {
  if (missing(value)) return '–'
  const abs = Math.abs(value)
  if (abs >= 1e6) return `${fixed2.format(value / 1e6)} s`
  if (abs >= 1e3) return `${fixed2.format(value / 1e3)} ms`
  return `${intFmt.format(Math.round(value) || 0)} us` // never "-0 us"
}

/** A percentage given in percent: 12.34 %. */
export function pct(value: number | null | undefined): string {
  if (missing(value)) return '–'
  return `${fixed2.format(value)} %`
}

export function num2(value: number | null | undefined): string {
  if (missing(value)) return '–'
  return upTo2.format(value)
}

export function count(value: number | null | undefined): string {
  if (missing(value)) return '–'
  return intFmt.format(value)
}

export function yesNo(value: boolean | string | null | undefined): string {
  if (value === null || value === undefined || value === '') return '–'
  if (typeof value === 'string') return /^(yes|true|1)$/i.test(value) ? 'Yes' : /^(no|false|0)$/i.test(value) ? 'No' : value
  return value ? 'Yes' : 'No'
}

export function share(part: number, total: number): number {
  return total > 0 ? (100 * part) / total : 0
}

// ---------------------------------------------------------------------------------------------
// Bytes, signed deltas and ms (Memory, Distributed, Module and Diff views)

const fixed3 = new Intl.NumberFormat('en-US', { minimumFractionDigits: 3, maximumFractionDigits: 3 })
const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB']

/** Bytes in binary units: "512 B", "9.82 MiB" (negative values keep their sign). */
export function bytes(value: number | null | undefined): string {
  if (missing(value)) return '–'
  let x = Math.abs(value)
  if (x < 1024) return `${intFmt.format(value)} B`
  let unit = 0
  while (x >= 1024 && unit < UNITS.length - 1) {
    x /= 1024
    unit += 1
  }
  return `${value < 0 ? '-' : ''}${fixed2.format(x)} ${UNITS[unit]}`
}

/** A signed byte delta: "+1.50 MiB", "-512 B", "0 B". */
export function signedBytes(value: number | null | undefined): string {
  if (missing(value)) return '–'
  return value > 0 ? `+${bytes(value)}` : bytes(value)
}

/** A time in us shown in ms with 3 decimals (us resolution): "1,234.567". */
export function msText(valueUs: number | null | undefined): string {
  if (missing(valueUs)) return '–'
  return fixed3.format(valueUs / 1000)
}

/** A signed integer number of us with thousands separators: "+1,234", "-56", "0". */
export function signedUs(value: number | null | undefined): string {
  if (missing(value)) return '–'
  const rounded = Math.round(value)
  return rounded > 0 ? `+${intFmt.format(rounded)}` : intFmt.format(rounded)
}

/** A signed duration with a unit per magnitude: "+12.35 ms", "-850 us", "0 us". */
export function signedDuration(value: number | null | undefined): string {
  if (missing(value)) return '–'
  return value > 0 ? `+${duration(value)}` : duration(value)
}

/** Relative change in percent: "+12.34 %", "-5.00 %"; from 1,000 % on without decimals
 * ("+12,346 %"), so a large change fits its column; '–' when the base is zero. */
export function deltaPct(base: number | null | undefined, exp: number | null | undefined): string {
  if (missing(base) || missing(exp) || base === 0) return '–'
  const value = (100 * (exp - base)) / Math.abs(base)
  return `${value > 0 ? '+' : ''}${Math.abs(value) >= 1000 ? intFmt.format(value) : fixed2.format(value)} %`
}

/** The number (or null) behind deltaPct, for sorting. */
export function deltaPctValue(base: number | null | undefined, exp: number | null | undefined): number | null {
  if (missing(base) || missing(exp) || base === 0) return null
  return (100 * (exp - base)) / Math.abs(base)
}

/**
 * Parses a size typed by the user: "2048", "4k", "1.5 MiB", "2 MB" (K/M/G are binary, as
 * everywhere in these views). '' is null (no bound); anything else unparsable is NaN.
 */
export function parseBytes(text: string): number | null {
  const trimmed = text.trim()
  if (!trimmed) return null
  const match = /^(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(i?b)?$/i.exec(trimmed)
  if (!match) return NaN
  const scale = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 }[match[2].toLowerCase()] ?? 1
  return Number(match[1]) * scale
}

/**
 * A tick interval for a byte axis up to `max`: 1, 2 or 5 x 10^n of a binary unit (KiB, MiB...),
 * so the labels read "256 MiB, 512 MiB" instead of "476.84 MiB". Undefined for an empty axis.
 */
export function bytesInterval(max: number, ticks = 5): number | undefined {
  if (!(max > 0) || !Number.isFinite(max)) return undefined
  let unit = 1
  while (max / unit >= 1024 && unit < 1024 ** 5) unit *= 1024
  const raw = max / unit / ticks
  const power = 10 ** Math.floor(Math.log10(raw))
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw) ?? 10 * power
  return Math.max(1, step * unit)
}

// ---------------------------------------------------------------------------------------------
// Time axes: one unit for the whole axis (its title says which), picked from the largest value
// by the same thresholds as `duration`, so an axis and the tooltips over it agree.

export interface TimeScale {
  unit: 'us' | 'ms' | 's'
  /** Microseconds per unit. */
  per: number
}

/** The unit of a time axis whose largest magnitude is `maxUs`. */
export function timeScale(maxUs: number): TimeScale {
  const m = Math.abs(maxUs)
  if (m >= 1e6) return { unit: 's', per: 1e6 }
  if (m >= 1e3) return { unit: 'ms', per: 1e3 }
  return { unit: 'us', per: 1 }
}

/** A tick label of a time axis in `scale` (the unit is in the axis title): "1,250", "2.5". */
export function inScale(valueUs: number, scale: TimeScale): string {
  return upTo2.format(valueUs / scale.per)
}
