// The capture routes (tb_plugin/server/capture_routes.py): which runs listen, ask one of them for
// a capture (POST), and every worker's answer to that request.
import { request, submit, type CaptureForm, type CaptureProgress } from '../api'

export const captureApi = {
  targets: (signal?: AbortSignal) => request('capture/targets', {}, signal),
  request: (form: CaptureForm) => submit('capture', form),
  status: (id: string, signal?: AbortSignal) => request('capture/status', { id }, signal),
}

export type WorkerAnswer = CaptureProgress['workers'][number]

/** One line per worker: "accepted", "recording step k of N", "written: files", "failed: why". */
export function answerText(w: WorkerAnswer): string {
  const text =
    w.state === 'recording'
      ? `recording step ${w.step} of ${w.steps}`
      : w.state === 'written'
        ? `written: ${w.files.join(', ')}`
        : w.state === 'failed'
          ? `failed: ${w.reason}`
          : 'accepted'
  return w.notes.length ? `${text} (${w.notes.join('; ')})` : text
}
