// Where a flow arrow whose one end is off screen meets the screen's edge (all-flows mode draws
// it to that point with a marker, so a clipped flow reads as clipped and never crosses the rows
// as a band from far away).

export interface Rect {
  left: number
  top: number
  right: number
  bottom: number
}

export function inside(r: Rect, x: number, y: number): boolean {
  return x >= r.left && x <= r.right && y >= r.top && y <= r.bottom
}

/**
 * The point where the segment from (x0, y0), inside `r`, towards (x1, y1), outside it, leaves
 * the rectangle; null when (x0, y0) is not inside or (x1, y1) is not outside.
 */
export function exitPoint(r: Rect, x0: number, y0: number, x1: number, y1: number): [number, number] | null {
  if (!inside(r, x0, y0) || inside(r, x1, y1)) return null
  const dx = x1 - x0
  const dy = y1 - y0
  let t = 1
  // The smallest positive parameter at which the segment crosses one of the four edges.
  if (dx > 0) t = Math.min(t, (r.right - x0) / dx)
  if (dx < 0) t = Math.min(t, (r.left - x0) / dx)
  if (dy > 0) t = Math.min(t, (r.bottom - y0) / dy)
  if (dy < 0) t = Math.min(t, (r.top - y0) / dy)
  return [x0 + t * dx, y0 + t * dy]
}
