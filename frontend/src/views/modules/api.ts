// API client of the Module view: `modules?run&worker&span` (build_modules). Times are totals over
// all calls of a row, in us.
import { ApiError, csvUrl, request, type Schemas, type Selection } from '../../api'

type ModulesPayload = Schemas['ModulesPayload']
export type ModuleRow = Schemas['ModuleRow']
export type FlameNode = Schemas['FlameNode']

/**
 * A 200 from `/modules`: the server answers only when the trace has modules, and then always
 * sends these fields (the schema has them optional because the unavailable payload lacks them).
 */
export type Modules = ModulesPayload & { available: true } & Required<Pick<ModulesPayload, 'source' | 'has_device' | 'has_backward' | 'backward' | 'warnings'>>

/** What the view shows: the modules, or why there are none (the 404's message). */
export type ModulesResult = Modules | { available: false; message: string }

export function modulesCsvUrl(sel: Selection): string {
  return csvUrl('modules', { ...sel })
}

/** The server answers 404 with the reason when the trace has no module events. */
export async function fetchModules(sel: Selection, signal?: AbortSignal): Promise<ModulesResult> {
  try {
    return (await request('modules', { ...sel }, signal)) as Modules
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return { available: false, message: err.message }
    throw err
  }
}
