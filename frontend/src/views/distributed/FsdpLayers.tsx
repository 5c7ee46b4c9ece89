// FSDP awareness of the Distributed view: all-gather / reduce-scatter grouped by module or layer
// (nn.Module events or FSDP2 record functions), with how much of each layer's communication
// overlapped computation (prefetch overlap).
import { Card, Empty } from '../../components/ui'
import { bytes, count, pct, us } from '../../format'
import type { DistributedPayload } from './api'

export function FsdpLayersCard({ data }: { data: DistributedPayload }) {
  const layers = data.fsdp_layers
  if (!data.fsdp && layers.rows.length === 0 && layers.unattributed_calls === 0) return null
  return (
    <Card
      title={data.fsdp ? 'FSDP layers' : 'All-gather / reduce-scatter by module'}
      subtitle={`Per module over every rank; overlap = the part of the calls' time (kernel span, else host range) overlapped by computation on the same rank${layers.source ? ` · modules from ${layers.source}` : ''}`}
      testId="dist-fsdp"
    >
      {layers.rows.length === 0 ? (
        <Empty title="No layers to show">{layers.note}</Empty>
      ) : (
        <table className="simple-table" data-testid="dist-fsdp-table">
          <thead>
            <tr>
              <th>Module</th>
              <th>Collective</th>
              <th className="right">Ranks</th>
              <th className="right">Calls</th>
              <th className="right">Size</th>
              <th className="right">Time (us)</th>
              <th className="right">Overlapped (us)</th>
              <th className="right">Exposed (us)</th>
              <th className="right">Prefetch overlap</th>
            </tr>
          </thead>
          <tbody>
            {layers.rows.map((r) => (
              <tr key={`${r.module}\u0000${r.collective}`} data-module={r.module} data-collective={r.collective}>
                <td className="mono">{r.module}</td>
                <td>{r.collective}</td>
                <td className="right">{count(r.ranks)}</td>
                <td className="right">{count(r.calls)}</td>
                <td className="right">{bytes(r.bytes)}</td>
                <td className="right">{us(r.time_us)}</td>
                <td className="right">{us(r.overlap_us)}</td>
                <td className="right">{us(r.exposed_us)}</td>
                <td className="right" data-col="overlap_share">
                  <span className="dist-fsdp-bar" style={{ width: `${Math.round(r.overlap_share * 60)}px` }} aria-hidden="true" />
                  {pct(r.overlap_share * 100)}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {layers.truncated && <p className="dist-note">The first {count(layers.rows.length)} of {count(layers.total)} groups are shown.</p>}
      {layers.unattributed_calls > 0 && (
        <p className="dist-note" data-testid="dist-fsdp-unattributed">
          {count(layers.unattributed_calls)} all-gather / reduce-scatter calls ({us(layers.unattributed_us)} us) are outside every module event.
        </p>
      )}
    </Card>
  )
}
