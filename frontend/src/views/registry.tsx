// The views the frontend can draw, by the name the server gives them. Which views a run offers,
// their order and whether they are run-level come from the server (`/viewspecs` and `/runs`);
// this table only adds the component that draws each one.
import type { ComponentType } from 'react'
import type { Selection } from '../api'
import type { Theme } from '../theme'
import type { Navigate, UiState } from '../urlState'
import { DiffView } from './diff/DiffView'
import { DistributedView } from './distributed/DistributedView'
import { GpuIdleView } from './gpu_idle/GpuIdleView'
import { InferenceView } from './inference/InferenceView'
import { KernelView } from './kernels/KernelView'
import { MemoryView } from './memory/MemoryView'
import { ModuleView } from './modules/ModuleView'
import { OperatorView } from './operators/OperatorView'
import { OverviewView } from './overview/OverviewView'
import { TraceView } from './trace/TraceView'

/** Everything a view may need from the shell; each view takes the props it uses. */
export interface ViewProps {
  selection: Selection
  state: UiState
  update: (patch: Partial<UiState>) => void
  theme: Theme
  views: string[]
  workerCount: number
  /** Whether this span has a memory-timeline export (undefined: the server does not say). */
  hasMemoryExport?: boolean
  onNavigate: Navigate
}

export interface ViewEntry {
  component: ComponentType<ViewProps>
  /** The tab's label when it is not the view's name. */
  label?: string
  /**
   * A run-level view (server flag) whose payload is still one worker's: Diff is offered per run
   * (it needs two workers or two runs) but compares one baseline worker with one experiment worker,
   * so it keeps the worker selector that other run-level views (Distributed) hide.
   */
  perWorker?: boolean
}

export const VIEWS: Record<string, ViewEntry> = {
  Overview: { component: OverviewView },
  Operator: { component: OperatorView },
  Kernel: { component: KernelView, label: 'GPU Kernel' },
  Trace: { component: TraceView },
  Memory: { component: MemoryView },
  Distributed: { component: DistributedView },
  Module: { component: ModuleView },
  Diff: { component: DiffView, perWorker: true },
  'GPU Idle': { component: GpuIdleView },
  Inference: { component: InferenceView },
}
