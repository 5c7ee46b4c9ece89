// Entry point loaded by TensorBoard: `import("./index.js").then((m) => m.render())` inside the
// plugin's iframe (data/plugin_entry.html). Mounts the app into document.body and injects the
// stylesheet as a <style> element (TensorBoard's CSP allows inline styles, not inline scripts).

import { QueryClientProvider } from '@tanstack/react-query'
import { createRoot, type Root } from 'react-dom/client'
import { setBaseUrl } from './api'
import { makeQueryClient } from './api/query'
import { App } from './App'
import { globalCss as css } from './styles'

let root: Root | null = null

export interface RenderOptions {
  /** Base URL of the plugin's routes; defaults to the folder this module was loaded from. */
  baseUrl?: string
}

export function render(options: RenderOptions = {}): void {
  const here = import.meta.url
  setBaseUrl(options.baseUrl ?? new URL('.', here))
  if (!document.getElementById('torch-prof-style')) {
    const style = document.createElement('style')
    style.id = 'torch-prof-style'
    style.textContent = css
    document.head.appendChild(style)
  }
  let container = document.getElementById('torch-prof-root')
  if (!container) {
    container = document.createElement('div')
    container.id = 'torch-prof-root'
    document.body.appendChild(container)
  }
  document.title = document.title || 'PyTorch Profiler'
  root?.unmount()
  root = createRoot(container)
  root.render(
    <QueryClientProvider client={makeQueryClient()}>
      <App />
    </QueryClientProvider>,
  )
}
