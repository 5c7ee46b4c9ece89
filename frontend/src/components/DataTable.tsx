// A sortable, virtualised table: only the rows in view (plus a small overscan) are in the DOM,
// so 100k rows scroll as smoothly as 100. Rows may expand into a detail panel of any height
// (measured after render). Headers wrap onto two lines (never cut) and every header has a
// tooltip; the first column stays in place while the table scrolls sideways.

import { useVirtualizer } from '@tanstack/react-virtual'
import { Fragment, useCallback, useMemo, useRef, useState, type KeyboardEvent, type ReactNode } from 'react'

export interface Column<T> {
  key: string
  header: string
  /** Tooltip on the header. */
  title?: string
  /** CSS grid track, e.g. "minmax(240px, 3fr)" or "110px". */
  width: string
  align?: 'left' | 'right'
  /** Text or node shown in the cell. */
  render: (row: T) => ReactNode
  /** Value used for sorting; without it the column is not sortable. */
  sortValue?: (row: T) => number | string | null | undefined
  /** Sort descending first (numbers). Default: true for right-aligned columns. */
  descFirst?: boolean
  /** Text for the title attribute of each cell (long names). */
  cellTitle?: (row: T) => string | undefined
}

export interface SortState {
  key: string
  desc: boolean
}

export function parseSort(text: string, fallback: SortState): SortState {
  const match = /^(-?)(.+)$/.exec(text)
  return match ? { key: match[2], desc: match[1] === '-' } : fallback
}

export function formatSort(sort: SortState): string {
  return `${sort.desc ? '-' : ''}${sort.key}`
}

interface Props<T> {
  columns: Column<T>[]
  rows: T[]
  rowKey: (row: T, index: number) => string
  sort: SortState | null
  onSort: (sort: SortState) => void
  /** Maximum height of the scroll area in px (the table shrinks to fit fewer rows). */
  maxHeight?: number
  rowHeight?: number
  label: string
  testId?: string
  emptyText?: string
  canExpand?: (row: T) => boolean
  renderExpanded?: (row: T) => ReactNode
}

const HEADER_HEIGHT = 40
const EXPANDER_WIDTH = 36

/** A header's tooltip: its full text (headers wrap, but a tooltip never cuts) and what it means. */
function headerTip<T>(column: Column<T>): string {
  const text = column.header.replace(/\n/g, ' ')
  return column.title && column.title !== text ? `${text}: ${column.title}` : text
}

/** Numbers numerically; text case-insensitively by code point (predictable, and fast on 100k rows). */
function compare(a: number | string, b: number | string): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b
  const x = String(a)
  const y = String(b)
  return x < y ? -1 : x > y ? 1 : 0
}

export function DataTable<T>({
  columns,
  rows,
  rowKey,
  sort,
  onSort,
  maxHeight = 560,
  rowHeight = 36,
  label,
  testId,
  emptyText = 'No rows',
  canExpand,
  renderExpanded,
}: Props<T>) {
  const scrollRef = useRef<HTMLDivElement>(null)
  const [expanded, setExpanded] = useState<Set<string>>(() => new Set())

  const sorted = useMemo(() => {
    const column = sort ? columns.find((c) => c.key === sort.key) : undefined
    if (!sort || !column?.sortValue) return rows
    const getValue = column.sortValue
    const keyed = rows.map((row, index) => {
      const raw = getValue(row)
      const value = typeof raw === 'number' && Number.isNaN(raw) ? null : typeof raw === 'string' ? raw.toLowerCase() : raw
      return { row, index, value }
    })
    keyed.sort((a, b) => {
      const aNull = a.value === null || a.value === undefined
      const bNull = b.value === null || b.value === undefined
      if (aNull || bNull) {
        if (aNull !== bNull) return aNull ? 1 : -1 // blanks last in both directions
        return a.index - b.index
      }
      const order = compare(a.value as number | string, b.value as number | string)
      return (sort.desc ? -order : order) || a.index - b.index
    })
    return keyed.map((k) => k.row)
  }, [rows, columns, sort])

  const keys = useMemo(() => sorted.map((row, i) => rowKey(row, i)), [sorted, rowKey])

  const virtualizer = useVirtualizer({
    count: sorted.length,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => rowHeight,
    overscan: 12,
    scrollMargin: HEADER_HEIGHT,
    getItemKey: (index) => keys[index] ?? index,
  })

  const template = columns.map((c) => c.width).join(' ')
  const expandable = Boolean(renderExpanded)
  const gridTemplate = expandable ? `${EXPANDER_WIDTH}px ${template}` : template

  const toggle = useCallback((key: string) => {
    setExpanded((prev) => {
      const next = new Set(prev)
      if (next.has(key)) next.delete(key)
      else next.add(key)
      return next
    })
  }, [])

  const onHeaderClick = (column: Column<T>) => {
    if (!column.sortValue) return
    const descFirst = column.descFirst ?? column.align === 'right'
    if (sort?.key === column.key) onSort({ key: column.key, desc: !sort.desc })
    else onSort({ key: column.key, desc: descFirst })
  }

  const onHeaderKey = (event: KeyboardEvent, column: Column<T>) => {
    if (event.key === 'Enter' || event.key === ' ') {
      event.preventDefault()
      onHeaderClick(column)
    }
  }

  const items = virtualizer.getVirtualItems()
  const bodyHeight = sorted.length === 0 ? 56 : virtualizer.getTotalSize()
  const height = Math.min(maxHeight, HEADER_HEIGHT + bodyHeight + 2)

  return (
    <div
      className="table-scroll"
      ref={scrollRef}
      style={{ height }}
      role="table"
      aria-label={label}
      aria-rowcount={sorted.length + 1}
      data-testid={testId}
      data-rows={sorted.length}
    >
      <div className="table-inner">
        <div className="table-header" role="row" style={{ gridTemplateColumns: gridTemplate, height: HEADER_HEIGHT }} aria-rowindex={1}>
          {expandable && <div className="th pinned" style={{ left: 0 }} role="columnheader" aria-label="Expand" />}
          {columns.map((column) => {
            const active = sort?.key === column.key
            const sortable = Boolean(column.sortValue)
            return (
              <div
                key={column.key}
                className={`th${column.align === 'right' ? ' right' : ''}${sortable ? ' sortable' : ''}${active ? ' active' : ''}${column === columns[0] ? ' pinned' : ''}`}
                role="columnheader"
                title={headerTip(column)}
                style={column === columns[0] ? { left: expandable ? EXPANDER_WIDTH : 0 } : undefined}
                aria-sort={active ? (sort?.desc ? 'descending' : 'ascending') : sortable ? 'none' : undefined}
                tabIndex={sortable ? 0 : undefined}
                onClick={() => onHeaderClick(column)}
                onKeyDown={(e) => onHeaderKey(e, column)}
                data-col={column.key}
              >
                <span className="th-label">{column.header}</span>
                {sortable && <span className="sort-icon" aria-hidden="true">{active ? (sort?.desc ? '▼' : '▲') : '↕'}</span>}
              </div>
            )
          })}
        </div>
        {sorted.length === 0 ? (
          <div className="table-empty">{emptyText}</div>
        ) : (
          <div className="table-body" style={{ height: virtualizer.getTotalSize() }}>
            {items.map((item) => {
              const row = sorted[item.index]
              const key = keys[item.index]
              const isOpen = expanded.has(key)
              const can = expandable && (canExpand ? canExpand(row) : true)
              return (
                <div
                  key={item.key}
                  data-index={item.index}
                  ref={virtualizer.measureElement}
                  className={`tr-group${item.index % 2 ? ' odd' : ''}`}
                  style={{ transform: `translateY(${item.start - HEADER_HEIGHT}px)` }}
                >
                  <div className={`tr${isOpen ? ' open' : ''}`} role="row" aria-rowindex={item.index + 2} style={{ gridTemplateColumns: gridTemplate, minHeight: rowHeight }} data-testid="table-row">
                    {expandable && (
                      <div className="td expander pinned" style={{ left: 0 }} role="cell">
                        {can && (
                          <button
                            type="button"
                            className="icon-button"
                            aria-expanded={isOpen}
                            aria-label={isOpen ? 'Hide call stacks' : 'Show call stacks'}
                            title={isOpen ? 'Hide call stacks' : 'Show call stacks'}
                            onClick={() => toggle(key)}
                          >
                            <span className={`chevron${isOpen ? ' open' : ''}`} aria-hidden="true" />
                          </button>
                        )}
                      </div>
                    )}
                    {columns.map((column) => (
                      <div
                        key={column.key}
                        className={`td${column.align === 'right' ? ' right' : ''}${column === columns[0] ? ' pinned' : ''}`}
                        style={column === columns[0] ? { left: expandable ? EXPANDER_WIDTH : 0 } : undefined}
                        role="cell"
                        data-col={column.key}
                        title={column.cellTitle?.(row)}
                      >
                        {column.render(row)}
                      </div>
                    ))}
                  </div>
                  {isOpen && renderExpanded && <Fragment>{renderExpanded(row)}</Fragment>}
                </div>
              )
            })}
          </div>
        )}
      </div>
    </div>
  )
}
