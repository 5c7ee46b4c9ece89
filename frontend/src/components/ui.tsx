import { useId, type ReactNode } from 'react'
import { ApiError } from '../api'

export function Card({
  title,
  subtitle,
  actions,
  children,
  className,
  testId,
}: {
  title?: ReactNode
  subtitle?: ReactNode
  actions?: ReactNode
  children: ReactNode
  className?: string
  testId?: string
}) {
  return (
    <section className={`card${className ? ` ${className}` : ''}`} data-testid={testId}>
      {(title || actions) && (
        <header className="card-header">
          <div>
            {title && <h2 className="card-title">{title}</h2>}
            {subtitle && <div className="card-subtitle">{subtitle}</div>}
          </div>
          {actions && <div className="card-actions">{actions}</div>}
        </header>
      )}
      <div className="card-body">{children}</div>
    </section>
  )
}

export function Field({ label, children, hint }: { label: string; children: (id: string) => ReactNode; hint?: ReactNode }) {
  const id = useId()
  return (
    <div className="field">
      <label className="field-label" htmlFor={id}>
        {label}
      </label>
      {children(id)}
      {hint && <div className="field-hint">{hint}</div>}
    </div>
  )
}

export function Select({
  id,
  value,
  options,
  onChange,
  testId,
  disabled,
}: {
  id?: string
  value: string
  options: { value: string; label: string }[]
  onChange: (value: string) => void
  testId?: string
  disabled?: boolean
}) {
  return (
    <div className="select-wrap">
      <select id={id} className="select" value={value} onChange={(e) => onChange(e.target.value)} data-testid={testId} disabled={disabled}>
        {options.map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
      </select>
    </div>
  )
}

export function Segmented<V extends string>({
  value,
  options,
  onChange,
  label,
  testId,
}: {
  value: V
  options: { value: V; label: string }[]
  onChange: (value: V) => void
  label: string
  testId?: string
}) {
  return (
    <div className="segmented" role="radiogroup" aria-label={label} data-testid={testId}>
      {options.map((o) => (
        <button
          key={o.value}
          type="button"
          role="radio"
          aria-checked={o.value === value}
          className={o.value === value ? 'active' : ''}
          onClick={() => onChange(o.value)}
          data-value={o.value}
        >
          {o.label}
        </button>
      ))}
    </div>
  )
}

export function SearchBox({
  value,
  onChange,
  placeholder,
  label,
  testId,
}: {
  value: string
  onChange: (value: string) => void
  placeholder: string
  label: string
  testId?: string
}) {
  return (
    <div className="search">
      <svg className="search-icon" viewBox="0 0 24 24" aria-hidden="true">
        <path d="M15.5 14h-.79l-.28-.27A6.47 6.47 0 0 0 16 9.5 6.5 6.5 0 1 0 9.5 16c1.61 0 3.09-.59 4.23-1.57l.27.28v.79l5 4.99L20.49 19l-4.99-5zm-6 0C7.01 14 5 11.99 5 9.5S7.01 5 9.5 5 14 7.01 14 9.5 11.99 14 9.5 14z" />
      </svg>
      <input
        type="search"
        className="input"
        value={value}
        placeholder={placeholder}
        aria-label={label}
        onChange={(e) => onChange(e.target.value)}
        data-testid={testId}
        spellCheck={false}
      />
    </div>
  )
}

export function TopNInput({ value, onChange, testId }: { value: string; onChange: (value: string) => void; testId?: string }) {
  const id = useId()
  const trimmed = value.trim().toLowerCase()
  const valid = trimmed === '' || trimmed === 'all' || (/^\d+$/.test(trimmed) && Number(trimmed) > 0)
  return (
    <div className="topn">
      <label htmlFor={id}>Top</label>
      <input
        id={id}
        className={`input narrow${valid ? '' : ' invalid'}`}
        value={value}
        inputMode="numeric"
        placeholder="all"
        onChange={(e) => onChange(e.target.value)}
        aria-invalid={!valid}
        title="Number of items shown in the charts and the table (empty or 'all' = all)"
        data-testid={testId}
      />
    </div>
  )
}

export function ProgressBar({ value, label }: { value: number | null; label?: string }) {
  const pctValue = value === null ? null : Math.round(Math.min(1, Math.max(0, value)) * 100)
  return (
    <div
      className={`progress${pctValue === null ? ' indeterminate' : ''}`}
      role="progressbar"
      aria-label={label}
      aria-valuemin={0}
      aria-valuemax={100}
      aria-valuenow={pctValue ?? undefined}
    >
      <div className="progress-fill" style={pctValue === null ? undefined : { width: `${pctValue}%` }} />
    </div>
  )
}

export function Loading({ progress, label = 'Loading' }: { progress?: number | null; label?: string }) {
  return (
    <div className="loading" data-testid="loading">
      <div className="loading-text">
        {label}
        {progress !== null && progress !== undefined ? ` · ${Math.round(progress * 100)}%` : '…'}
      </div>
      <ProgressBar value={progress ?? null} label={label} />
    </div>
  )
}

export function Banner({
  kind,
  title,
  children,
  testId,
}: {
  kind: 'error' | 'warning' | 'info'
  title: ReactNode
  children?: ReactNode
  testId?: string
}) {
  return (
    <div className={`banner ${kind}`} role={kind === 'error' ? 'alert' : 'status'} data-testid={testId}>
      <span className="banner-icon" aria-hidden="true">
        {kind === 'info' ? 'i' : '!'}
      </span>
      <div className="banner-content">
        <div className="banner-title">{title}</div>
        {children && <div className="banner-text">{children}</div>}
      </div>
    </div>
  )
}

export function ErrorBanner({ error, what }: { error: Error; what: string }) {
  const api = error instanceof ApiError ? error : null
  return (
    <Banner kind="error" title={`Could not load ${what}`} testId="error-banner">
      <div>{error.message}</div>
      {api && api.messages.length > 0 && (
        <ul className="messages">
          {api.messages.filter((m) => m !== error.message).slice(0, 20).map((m, i) => (
            <li key={i}>{m}</li>
          ))}
        </ul>
      )}
    </Banner>
  )
}

export function Empty({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="empty">
      <div className="empty-title">{title}</div>
      {children && <div className="empty-text">{children}</div>}
    </div>
  )
}

export function Stat({ label, value, hint, testId }: { label: string; value: ReactNode; hint?: string; testId?: string }) {
  return (
    <div className="stat" title={hint}>
      <div className="stat-label">{label}</div>
      <div className="stat-value" data-testid={testId}>
        {value}
      </div>
    </div>
  )
}

export function DownloadLink({ href, testId, label = 'CSV' }: { href: string; testId?: string; label?: string }) {
  return (
    <a className="button" href={href} download data-testid={testId} title="Download the whole table as CSV">
      <svg viewBox="0 0 24 24" aria-hidden="true" className="button-icon">
        <path d="M5 20h14v-2H5v2zM19 9h-4V3H9v6H5l7 7 7-7z" />
      </svg>
      {label}
    </a>
  )
}
