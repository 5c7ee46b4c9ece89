// Jump-to-source: ask VS Code (the TensorBoard integration) to open a file at a line. Used by
// the call stacks and by the Inductor kernels of the compiled regions.

/** Post `{filename, line}` to the embedding editor; addressed to our own origin only. */
export function jumpToSource(filename: string, line: number): void {
  try {
    const origin = window.location.origin
    if (!origin || origin === 'null') return
    window.parent.parent.postMessage({ filename, line }, origin)
  } catch {
    // no parent to talk to
  }
}
