import type { ReactNode } from 'react'

/** A labelled number with a line under it; `testId` names the value, `${testId}-sub` the line. */
export function StatCard({
  label,
  value,
  sub,
  testId,
  className,
  valueClassName,
}: {
  label: ReactNode
  value: ReactNode
  sub?: ReactNode
  testId: string
  className?: string
  valueClassName?: string
}) {
  return (
    <div className={`stat${className ? ` ${className}` : ''}`}>
      <div className="stat-label">{label}</div>
      <div className={`stat-value${valueClassName ? ` ${valueClassName}` : ''}`} data-testid={testId}>
        {value}
      </div>
      {sub !== undefined && (
        <div className="stat-sub" data-testid={`${testId}-sub`}>
          {sub}
        </div>
      )}
    </div>
  )
}
