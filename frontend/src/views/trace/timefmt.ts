// Time formatting of the Trace view (inputs in microseconds), locale-independent.

function trim(text: string): string {
  return text.includes('.') ? text.replace(/\.?0+$/, '') : text
}

/** A duration that reads well at any scale: "850 ns", "12.35 us", "4.2 ms", "1.203 s". */
export function fmtDuration(us: number | null | undefined): string {
  if (us === null || us === undefined || !Number.isFinite(us)) return '–'
  const abs = Math.abs(us)
  if (abs === 0) return '0 us'
  if (abs < 1) return `${trim((us * 1000).toFixed(abs < 0.01 ? 1 : 0))} ns`
  if (abs < 1000) return `${trim(us.toFixed(abs < 10 ? 3 : abs < 100 ? 2 : 1))} us`
  if (abs < 1e6) return `${trim((us / 1e3).toFixed(3))} ms`
  return `${trim((us / 1e6).toFixed(3))} s`
}

/** A 1-2-5 step of at least `minUs`. */
export function niceStep(minUs: number): number {
  if (!(minUs > 0) || !Number.isFinite(minUs)) return 1
  const pow = Math.pow(10, Math.floor(Math.log10(minUs)))
  for (const m of [1, 2, 5, 10]) if (m * pow >= minUs) return m * pow
  return 10 * pow
}

/**
 * Label of a ruler tick at `t` (us) when ticks are `step` apart and the view reaches `extent`:
 * the unit follows the view's magnitude ("468.70 ms", not "468700 us"), the decimals the step.
 */
export function fmtTick(t: number, step: number, extent: number): string {
  const mag = Math.max(Math.abs(extent), step)
  let unit = 'us'
  let scale = 1
  if (mag >= 1e6) {
    unit = 's'
    scale = 1e6
  } else if (mag >= 1e3) {
    unit = 'ms'
    scale = 1e3
  } else if (mag < 1) {
    unit = 'ns'
    scale = 1e-3
  }
  const decimals = Math.max(0, Math.min(9, -Math.floor(Math.log10(step / scale) + 1e-9)))
  const value = t / scale
  const text = Math.abs(value) < 0.5 * Math.pow(10, -decimals) ? '0' : value.toFixed(decimals)
  return `${text} ${unit}`
}

/** A time position relative to the trace start, with more precision than a tick label. */
export function fmtTime(t: number): string {
  const abs = Math.abs(t)
  if (abs < 1000) return `${trim(t.toFixed(3))} us`
  if (abs < 1e6) return `${trim((t / 1e3).toFixed(6))} ms`
  return `${trim((t / 1e6).toFixed(9))} s`
}

/** The status line: "2,399 events loaded · 1,919 in 201 merged blocks". */
export function fmtLoaded(stats: { events: number; blocks: number; hidden: number }): string {
  const merged = stats.hidden ? ` · ${stats.hidden.toLocaleString('en-US')} in ${stats.blocks.toLocaleString('en-US')} merged blocks` : ''
  return `${stats.events.toLocaleString('en-US')} events loaded${merged}`
}

const bytesFmt = ['B', 'KiB', 'MiB', 'GiB', 'TiB'] // binary, as the Memory view

export function fmtBytes(value: number): string {
  let v = value
  let i = 0
  while (Math.abs(v) >= 1024 && i < bytesFmt.length - 1) {
    v /= 1024
    i++
  }
  return `${trim(v.toFixed(i === 0 ? 0 : v >= 100 ? 0 : v >= 10 ? 1 : 2))} ${bytesFmt[i]}`
}

export function fmtCounter(value: number, unit: string): string {
  if (!Number.isFinite(value)) return '–'
  if (unit === 'fraction') return `${trim((value * 100).toFixed(1))} %`
  if (unit === 'bytes') return fmtBytes(value)
  return String(Math.round(value * 100) / 100)
}
