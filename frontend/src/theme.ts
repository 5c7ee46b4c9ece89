// Light/dark theme. Inside TensorBoard the plugin follows TensorBoard's own setting (the
// `dark-mode` class TensorBoard toggles on its <body>, same-origin parent document); opened on
// its own, it follows the browser's prefers-color-scheme. The result is written as
// `data-theme="light|dark"` on the plugin document's <html>.

import { useEffect, useState } from 'react'

export type Theme = 'light' | 'dark'

function tensorBoardBody(): HTMLElement | null {
  try {
    if (window.parent === window) return null
    const doc = window.parent.document
    if (!doc.querySelector('tb-webapp, tf-tensorboard')) return null
    return doc.body
  } catch {
    return null // cross-origin parent: not TensorBoard's own page
  }
}

function currentTheme(): Theme {
  const body = tensorBoardBody()
  if (body) return body.classList.contains('dark-mode') ? 'dark' : 'light'
  return window.matchMedia?.('(prefers-color-scheme: dark)').matches ? 'dark' : 'light'
}

/** The theme's CSS variables, set before React re-renders: a canvas repainted by a child's
 * effect (the Trace view) reads the new colours, not the old ones. */
function applyTheme(theme: Theme): void {
  document.documentElement.dataset.theme = theme
  document.documentElement.style.colorScheme = theme
}

export function useTheme(): Theme {
  const [theme, setTheme] = useState<Theme>(() => {
    const initial = currentTheme()
    applyTheme(initial)
    return initial
  })

  useEffect(() => {
    const update = () => {
      const next = currentTheme()
      applyTheme(next)
      setTheme(next)
    }
    const media = window.matchMedia?.('(prefers-color-scheme: dark)')
    media?.addEventListener('change', update)
    let observer: MutationObserver | null = null
    const body = tensorBoardBody()
    if (body && typeof MutationObserver !== 'undefined') {
      observer = new MutationObserver(update)
      observer.observe(body, { attributes: true, attributeFilter: ['class'] })
    }
    return () => {
      media?.removeEventListener('change', update)
      observer?.disconnect()
    }
  }, [])

  useEffect(() => applyTheme(theme), [theme])

  return theme
}
