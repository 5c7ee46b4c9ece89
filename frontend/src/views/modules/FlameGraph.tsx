// A top-down flame graph (icicle) of the module tree, drawn with absolutely positioned boxes:
// widths are shares of the focused node's value; click a box to zoom into its subtree, click an
// ancestor bar or the breadcrumb to zoom out. Boxes under half a pixel are not drawn.
import { useEffect, useMemo, useRef, useState, type MouseEvent } from 'react'
import { duration, pct, share } from '../../format'
import type { FlameNode } from './api'

interface Props {
  roots: FlameNode[]
  /** What `value` is: "Device total" or "Host total". */
  valueLabel: string
  testId?: string
}

interface Box {
  node: FlameNode
  path: number[]
  depth: number
  x: number
  w: number
}

const ROW = 22
const ALL: FlameNode = { name: 'All modules', module_id: -1, value: 0, children: [] }

/** Value used for widths: never less than the children's sum (merged rows can exceed it). */
function extent(node: FlameNode): number {
  const kids = node.children.reduce((acc, c) => acc + extent(c), 0)
  return Math.max(node.value, kids)
}

function nodeAt(root: FlameNode, path: number[]): FlameNode[] {
  const chain = [root]
  let node = root
  for (const i of path) {
    const next = node.children[i]
    if (!next) break
    chain.push(next)
    node = next
  }
  return chain
}

/** A stable warm colour per module class (name without the _<n> instance suffix). */
function colour(name: string): string {
  const base = name.replace(/_\d+$/, '').replace(/\.backward$/, '')
  let h = 0
  for (let i = 0; i < base.length; i++) h = (h * 31 + base.charCodeAt(i)) >>> 0
  return `hsl(${18 + (h % 42)}, ${72 + (h % 16)}%, var(--flame-l))`
}

export function FlameGraph({ roots, valueLabel, testId }: Props) {
  const root = useMemo<FlameNode>(() => (roots.length === 1 ? roots[0] : { ...ALL, value: roots.reduce((a, r) => a + extent(r), 0), children: roots }), [roots])
  const [path, setPath] = useState<number[]>([])
  const [hover, setHover] = useState<{ box: Box; x: number; y: number } | null>(null)
  const ref = useRef<HTMLDivElement>(null)
  const [width, setWidth] = useState(800)

  useEffect(() => {
    const el = ref.current
    if (!el) return
    const update = () => setWidth(el.clientWidth || 800)
    update()
    const observer = new ResizeObserver(update)
    observer.observe(el)
    return () => observer.disconnect()
  }, [])
  useEffect(() => setPath([]), [root])

  const total = extent(root)
  const { chain, boxes, depth } = useMemo(() => {
    const chain = nodeAt(root, path)
    const focus = chain[chain.length - 1]
    const out: Box[] = []
    // ancestors of the focus: full-width bars
    chain.slice(0, -1).forEach((node, d) => out.push({ node, path: path.slice(0, d), depth: d, x: 0, w: 1 }))
    const top = chain.length - 1
    const scale = extent(focus) || 1
    let maxDepth = top
    const walk = (node: FlameNode, nodePath: number[], d: number, x: number) => {
      const w = extent(node) / scale
      if (w * width < 0.5) return
      out.push({ node, path: nodePath, depth: d, x, w })
      maxDepth = Math.max(maxDepth, d)
      let cx = x
      node.children.forEach((child, i) => {
        walk(child, [...nodePath, i], d + 1, cx)
        cx += extent(child) / scale
      })
    }
    walk(focus, path, top, 0)
    return { chain, boxes: out, depth: maxDepth + 1 }
  }, [root, path, width])
  const focus = chain[chain.length - 1]

  const onMove = (event: MouseEvent, box: Box) => {
    const rect = ref.current?.getBoundingClientRect()
    if (!rect) return
    setHover({ box, x: event.clientX - rect.left, y: event.clientY - rect.top })
  }

  return (
    <div className="flame" data-testid={testId}>
      <div className="flame-toolbar">
        <nav className="flame-crumbs" aria-label="Flame graph zoom" data-testid="flame-crumbs">
          {chain.map((node, i) => (
            <span key={i} className="flame-crumb">
              {i > 0 && <span className="flame-sep">›</span>}
              {i < chain.length - 1 ? (
                <button type="button" className="link-button" onClick={() => setPath(path.slice(0, i))}>
                  {node.name}
                </button>
              ) : (
                <span className="flame-current">{node.name}</span>
              )}
            </span>
          ))}
        </nav>
        <span className="muted small">
          {valueLabel}: {duration(extent(focus))} · {pct(share(extent(focus), total))} of all
        </span>
        {path.length > 0 && (
          <button type="button" className="button" onClick={() => setPath([])} data-testid="flame-reset">
            Reset zoom
          </button>
        )}
      </div>
      <div className="flame-canvas" ref={ref} style={{ height: depth * ROW }} onMouseLeave={() => setHover(null)}>
        {boxes.map((box) => {
          const ancestor = box.depth < chain.length - 1
          const px = box.w * width
          return (
            <div
              key={`${box.path.join('-')}:${box.depth}`}
              className={`flame-box${ancestor ? ' ancestor' : ''}`}
              style={{ left: `${box.x * 100}%`, width: `${box.w * 100}%`, top: box.depth * ROW, background: ancestor ? undefined : colour(box.node.name) }}
              onClick={() => setPath(box.path)}
              onMouseMove={(e) => onMove(e, box)}
              role="button"
              tabIndex={px > 24 ? 0 : -1}
              onKeyDown={(e) => {
                if (e.key === 'Enter' || e.key === ' ') {
                  e.preventDefault()
                  setPath(box.path)
                }
              }}
              aria-label={`${box.node.name}: ${duration(box.node.value)}`}
              data-name={box.node.name}
              data-value={box.node.value}
            >
              {px > 36 ? <span className="flame-label">{box.node.name}</span> : null}
            </div>
          )
        })}
        {hover && (
          <div
            className="flame-tip"
            style={{ left: Math.min(hover.x + 12, Math.max(0, width - 280)), top: hover.y + 16 }}
            role="tooltip"
          >
            <div className="flame-tip-name">{hover.box.node.name}</div>
            <div>
              {valueLabel}: <b>{duration(hover.box.node.value)}</b>
            </div>
            <div className="muted">
              {pct(share(hover.box.node.value, total))} of all{focus !== root ? ` · ${pct(share(hover.box.node.value, extent(focus)))} of ${focus.name}` : ''}
            </div>
            {hover.box.node.children.length > 0 && <div className="muted">Click to zoom in</div>}
          </div>
        )}
      </div>
    </div>
  )
}
