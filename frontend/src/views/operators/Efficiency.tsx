// The Operator view's efficiency sections: torch.compile regions (each Inductor kernel with its
// source file, jump-to-source like the call stacks) and the roofline (chart, table, MFU per step).
import { useMemo } from 'react'
import type { Selection } from '../../api'
import { Chart } from '../../charts/Chart'
import { chartColors } from '../../charts/options'
import { Async } from '../../components/Async'
import { Card, Empty } from '../../components/ui'
import { count, num2, pct, us, yesNo } from '../../format'
import { useAsync } from '../../hooks'
import type { Theme } from '../../theme'
import { fetchCompiled, fetchRoofline, type CompiledRegion, type InductorKernel, type Roofline } from './api'
import { ABOVE_ROOF_REASONS, flopsReasonText, rooflineOption } from './roofline'
import { jumpToSource } from './source'

function selKey(sel: Selection): string {
  return `${sel.run}\u0000${sel.worker}\u0000${sel.span}`
}

export function CompiledSection({ selection }: { selection: Selection }) {
  const state = useAsync('compiled', selKey(selection), (signal) => fetchCompiled(selection, signal))
  if (state.status === 'ok' && !state.data.available) return null
  return (
    <Card title="Compiled regions" subtitle="torch.compile graphs, their Inductor kernels and the eager ops they still call" testId="compiled-card">
      <Async state={state} what="the compiled regions" label="Loading compiled regions">
        {(data) => (
          <div className="compiled" data-testid="compiled">
            {data.regions.map((r) => (
              <Region key={r.name} region={r} />
            ))}
          </div>
        )}
      </Async>
    </Card>
  )
}

function Region({ region }: { region: CompiledRegion }) {
  return (
    <section className="region" data-testid="compiled-region">
      <div className="region-head">
        <span className="region-name">{region.name}</span>
        <span className="muted">
          {count(region.calls)} calls · host {us(region.host_us)} us · guards {us(region.guard_us)} us · launches {us(region.launch_us)} us · device {us(region.device_us)} us ({count(region.device_kernels)} kernels)
        </span>
      </div>
      <table className="simple-table region-table">
        <thead>
          <tr>
            <th>Inductor kernel</th>
            <th>Source</th>
            <th className="right">Calls</th>
            <th className="right">Host (us)</th>
            <th className="right">Device (us)</th>
          </tr>
        </thead>
        <tbody>
          {region.inductor_kernels.map((k, i) => (
            <KernelRow key={`${k.name}\u0000${k.file ?? ''}\u0000${i}`} kernel={k} />
          ))}
          {region.extern_ops.map((op) => (
            <tr key={op.name} className="extern-op">
              <td className="mono">{op.name}</td>
              <td className="muted">eager (extern) op</td>
              <td className="right">{count(op.calls)}</td>
              <td className="right">{us(op.host_us)}</td>
              <td className="right">{us(op.device_us)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  )
}

function KernelRow({ kernel: k }: { kernel: InductorKernel }) {
  const where = k.file ? `${k.file}${k.line !== null && k.line !== undefined ? `:${k.line}` : ''}` : null
  return (
    <tr data-testid="inductor-kernel">
      <td className="mono" title={k.fused ? `fuses ${k.fused}` : undefined}>
        {k.name}
        <div className="muted small">
          {k.backend ?? 'unknown backend'}
          {k.hash ? ` · ${k.hash.slice(0, 12)}…` : ''}
          {k.fused ? ` · fuses ${k.fused}` : ''}
        </div>
      </td>
      <td>
        {where ? (
          <button type="button" className="frame-link" title={`Open ${where} in the editor (VS Code)`} onClick={() => jumpToSource(k.file!, k.line ?? 1)} data-testid="kernel-source">
            <span className="frame-file">{where}</span>
          </button>
        ) : (
          <span className="muted">not recorded</span>
        )}
      </td>
      <td className="right">{count(k.calls)}</td>
      <td className="right">{us(k.host_us)}</td>
      <td className="right">{us(k.device_us)}</td>
    </tr>
  )
}

/** Why (some of) a row's FLOPs are unknown, shown in its GFLOP cell. */
function FlopsReason({ reason, some }: { reason: string; some: boolean }) {
  return (
    <div className="muted flops-reason" title={reason} data-testid="flops-reason">
      {flopsReasonText(reason, some)}
    </div>
  )
}

function tf(value: number | null | undefined): string {
  if (value === null || value === undefined) return '–'
  return value >= 0.01 ? num2(value) : value.toPrecision(2)
}

export function RooflineSection({ selection, theme }: { selection: Selection; theme: Theme }) {
  const state = useAsync('roofline', selKey(selection), (signal) => fetchRoofline(selection, signal))
  return (
    <Card title="FLOPs and roofline" subtitle="Outermost FLOP-carrying operators; * marks shape-based estimates" testId="roofline-card">
      <Async state={state} what="the roofline" label="Loading the roofline">
        {(data) => (data.rows.length === 0 ? <Empty title="No FLOPs">No operator of this span has a FLOPs formula or a recorded `flops`.</Empty> : <RooflineBody data={data} theme={theme} />)}
      </Async>
    </Card>
  )
}

function RooflineBody({ data, theme }: { data: Roofline; theme: Theme }) {
  const option = useMemo(() => rooflineOption(data.rows, data.device, chartColors(theme)), [data, theme])
  const d = data.device
  const device = d ? `${d.name ?? `GPU ${d.id}`} · ${d.vendor ?? 'unknown vendor'}${d.architecture ? ` · ${d.architecture}` : ''}` : 'CPU-only trace'
  return (
    <div className="roofline" data-testid="roofline">
      <div className="muted" data-testid="roofline-device">
        {device}
        {d && (d.peaks_model ? ` · peaks: ${d.peaks_model} (${num2(d.memory_tbps)} TB/s)` : ` · ${d.peaks_reason ?? 'not in the peaks table'}: no ceilings, no MFU`)}
        {` · time = ${data.time_basis} time`}
      </div>
      <Chart option={option} height={320} label="Roofline: achieved TFLOP/s against arithmetic intensity" testId="roofline-chart" />
      <table className="simple-table roofline-table">
        <thead>
          <tr>
            <th>Operator</th>
            <th title="The math it ran, which picks its peak (tensor-core kernel names, else the dtype)">Precision</th>
            <th className="right">Calls</th>
            <th className="right">GFLOP</th>
            <th className="right">MB</th>
            <th className="right">Time (us)</th>
            <th className="right">TFLOP/s</th>
            <th className="right">TB/s</th>
            <th className="right">FLOP/B</th>
            <th className="right" title="Memory-bandwidth utilisation: achieved TB/s / peak TB/s">MBU</th>
            <th>Bound</th>
            <th>Above roof</th>
          </tr>
        </thead>
        <tbody>
          {data.rows.map((r) => (
            <tr key={`${r.name}\u0000${r.dtype}\u0000${r.precision}`} data-testid="roofline-row" className={r.above_roof ? 'flagged' : undefined}>
              <td className="mono">
                {r.name}
                {r.estimate ? ' *' : ''}
              </td>
              <td title={`dtype ${r.dtype}`}>{r.precision === r.dtype ? r.dtype : `${r.precision} (${r.dtype} data)`}</td>
              <td className="right">{count(r.calls)}</td>
              <td className="right">
                {r.flops === null ? '–' : tf(r.flops / 1e9)}
                {r.flops_reason ? <FlopsReason reason={r.flops_reason} some={r.flops !== null} /> : null}
              </td>
              <td className="right">{r.bytes === null ? '–' : tf(r.bytes / 1e6)}</td>
              <td className="right">{us(r.time_us)}</td>
              <td className="right">{tf(r.achieved_tflops)}</td>
              <td className="right">{tf(r.achieved_tbps)}</td>
              <td className="right">{tf(r.intensity)}</td>
              <td className="right">{r.mbu_pct === null || r.mbu_pct === undefined ? '–' : pct(r.mbu_pct)}</td>
              <td>{r.bound ?? '–'}</td>
              <td data-testid="roofline-flag" title={r.above_roof ? ABOVE_ROOF_REASONS[r.above_roof] : undefined}>
                {r.above_roof ? `${r.above_roof} (not in MFU)` : '–'}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <div className="muted roofline-steps" data-testid="roofline-steps">
        MFU / MBU per step:{' '}
        {data.steps
          .map((s) => `${s.step}: ${s.mfu_pct === null || s.mfu_pct === undefined ? 'n/a' : pct(s.mfu_pct)} / ${s.mbu_pct === null || s.mbu_pct === undefined ? 'n/a' : pct(s.mbu_pct)} (${tf(s.tflops)} TFLOP/s)`)
          .join(' · ')}
        {` · estimates: ${yesNo(data.rows.some((r) => r.estimate))}`}
      </div>
    </div>
  )
}
