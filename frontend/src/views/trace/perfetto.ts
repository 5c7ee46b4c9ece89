// "Open in Perfetto": the documented postMessage protocol of ui.perfetto.dev
// (https://perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui). Only ever started by a
// click: the page opens the Perfetto tab, pings it until it answers PONG, then posts the trace
// (gunzipped, as Perfetto expects JSON bytes). Messages go to that exact origin, never '*'.
// Nothing is fetched from the internet by this page; the trace comes from our own server.

export const PERFETTO_ORIGIN = 'https://ui.perfetto.dev'
const PING_MS = 250
const TIMEOUT_MS = 30_000

async function traceBytes(url: string, signal: AbortSignal): Promise<{ buffer: ArrayBuffer; fileName: string }> {
  const response = await fetch(url, { signal, credentials: 'same-origin' })
  if (!response.ok) throw new Error(`Download failed: HTTP ${response.status}`)
  const disposition = response.headers.get('Content-Disposition') ?? ''
  const match = /filename\*?=(?:UTF-8'')?"?([^";]+)"?/i.exec(disposition)
  let fileName = match ? decodeURIComponent(match[1]) : 'trace.json'
  let buffer = await response.arrayBuffer()
  const head = new Uint8Array(buffer, 0, Math.min(2, buffer.byteLength))
  if (head[0] === 0x1f && head[1] === 0x8b) {
    // Stored gzip (the server sends the file as it is on disk): Perfetto wants the JSON.
    const stream = new Blob([buffer]).stream().pipeThrough(new DecompressionStream('gzip'))
    buffer = await new Response(stream).arrayBuffer()
    fileName = fileName.replace(/\.gz$/i, '')
  }
  return { buffer, fileName }
}

/**
 * Opens Perfetto in a new tab and hands it the trace. Must be called from a click handler (the
 * window is opened synchronously, before any await, so popup blockers allow it).
 * `onStatus` reports progress for the button's label.
 */
export function openInPerfetto(downloadUrl: string, title: string, onStatus: (text: string | null, error?: boolean) => void): () => void {
  const win = window.open(PERFETTO_ORIGIN + '/#!/', '_blank')
  if (!win) {
    onStatus('The browser blocked the new tab; allow pop-ups for TensorBoard', true)
    return () => undefined
  }
  const controller = new AbortController()
  let timer = 0
  let done = false
  const finish = (text: string | null, error = false) => {
    done = true
    window.clearInterval(timer)
    window.removeEventListener('message', onMessage)
    onStatus(text, error)
  }
  let payload: { buffer: ArrayBuffer; fileName: string } | null = null
  let ready = false
  const send = () => {
    if (!payload || !ready || done) return
    win.postMessage({ perfetto: { buffer: payload.buffer, title, fileName: payload.fileName } }, PERFETTO_ORIGIN)
    finish(null)
  }
  const onMessage = (event: MessageEvent) => {
    if (event.origin !== PERFETTO_ORIGIN || event.source !== win || event.data !== 'PONG') return
    ready = true
    window.clearInterval(timer)
    send()
  }
  window.addEventListener('message', onMessage)
  onStatus('Preparing the trace…')
  traceBytes(downloadUrl, controller.signal).then(
    (data) => {
      payload = data
      if (!ready) onStatus('Waiting for Perfetto…')
      send()
    },
    (err: Error) => {
      if (err.name !== 'AbortError') finish(err.message, true)
    },
  )
  const started = Date.now()
  timer = window.setInterval(() => {
    if (win.closed) return finish('The Perfetto tab was closed', true)
    if (Date.now() - started > TIMEOUT_MS) return finish('Perfetto did not answer', true)
    try {
      win.postMessage('PING', PERFETTO_ORIGIN)
    } catch {
      // not loaded yet
    }
  }, PING_MS)
  return () => {
    controller.abort()
    if (!done) finish(null)
  }
}
