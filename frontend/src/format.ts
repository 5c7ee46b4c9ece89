// Number formatting, locale-independent (en-US grouping) so what the page shows is predictable.

const intFmt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 })
const fixed2 = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })
const upTo2 = new Intl.NumberFormat('en-US', { maximumFractionDigits: 2 })

/** Microseconds as an integer with thousands separators: 12,345. */
export function us(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '–'
  return intFmt.format(Math.round(value))
}

/** A duration in us with a unit that reads well: "850 us", "12.35 ms", "1.20 s". */
export function duration(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '–'
  const abs = Math.abs(value)
  if (abs >= 1e6) return `${fixed2.format(value / 1e6)} s`
  if (abs >= 1e3) return `${fixed2.format(value / 1e3)} ms`
  return `${intFmt.format(Math.round(value))} us`
}

/** A percentage given in percent: 12.34 %. */
export function pct(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '–'
  return `${fixed2.format(value)} %`
}

export function num2(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '–'
  return upTo2.format(value)
}

export function count(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '–'
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
