import { useInsertionEffect } from 'react'

/**
 * Injects a view's stylesheet (imported with `?inline`, so the bundle stays one JS file) once,
 * as a <style> element after the app's own: TensorBoard's CSP allows inline styles.
 */
export function useViewStyle(id: string, css: string): void {
  useInsertionEffect(() => {
    const elementId = `torch-prof-style-${id}`
    if (document.getElementById(elementId)) return
    const style = document.createElement('style')
    style.id = elementId
    style.textContent = css
    document.head.appendChild(style)
  }, [id, css])
}
