// The capture routes (tb_plugin/server/capture_routes.py): which runs listen, ask one of them for
// a capture (POST), and every worker's answer to that request.
import { getJson, postJson, routeUrl, type CaptureAccepted, type CaptureForm, type CaptureProgress, type CaptureTargets } from '../api'

export const captureApi = {
  targets: (signal?: AbortSignal) => getJson<CaptureTargets>('capture/targets', {}, signal),
  request: (form: CaptureForm) => postJson<CaptureAccepted>(routeUrl('capture'), form),
  status: (id: string, signal?: AbortSignal) => getJson<CaptureProgress>('capture/status', { id }, signal),
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
