/** An array field of a payload, or [] when the server sent something else. */
export function list<T>(value: unknown): T[] {
  return Array.isArray(value) ? (value as T[]) : []
}
