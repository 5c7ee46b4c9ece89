// A slice of the URL state: the fields one part of the UI keeps in the URL hash, each with its
// key in the hash, its default (omitted from the URL) and, for a choice, the values it accepts.
// Each view declares its own slice (views/<name>/state.ts); urlState.ts puts them together.

export interface Field<V extends string = string> {
  key: string
  fallback: V
  allowed?: readonly V[]
}

export type Slice = Record<string, Field>

/** The values of a slice's fields, typed by the field (a choice is its union of values). */
export type SliceState<S extends Slice> = { [K in keyof S]: S[K] extends Field<infer V> ? V : never }

/** Free text; `fallback` when absent. */
export function text(key: string, fallback = ''): Field<string> {
  return { key, fallback }
}

/** One of `options`; the first when absent or unknown. */
export function choice<const V extends string>(key: string, options: readonly [V, ...V[]]): Field<V> {
  return { key, fallback: options[0], allowed: options }
}
