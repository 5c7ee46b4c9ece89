import { Card } from './ui'

const RECORDER = `from tb_plugin.recorder import Recorder

with Recorder("logs", run="resnet_bs32") as rec:
    for batch in loader:
        train_step(batch)
        rec.step()`

const TORCH_PROFILER = `from torch.profiler import (
    ProfilerActivity, profile, schedule, tensorboard_trace_handler)

with profile(
    activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
    schedule=schedule(wait=1, warmup=1, active=3),
    on_trace_ready=tensorboard_trace_handler(
        "logs/resnet_bs32", use_gzip=True),
    record_shapes=True,
    with_stack=True,
) as prof:
    for batch in loader:
        train_step(batch)
        prof.step()`

/** Shown when the log directory holds no trace: how to record one. */
export function NoRuns({ logdir }: { logdir: string }) {
  return (
    <div className="view no-runs" data-testid="no-runs">
      <Card title="No profiler runs found" subtitle={logdir ? <>Nothing in <span className="mono">{logdir}</span> looks like a PyTorch profiler trace yet.</> : undefined}>
        <p className="lead">
          Record a few training steps, write the traces under the log directory TensorBoard was started with
          (one folder per run), and this page fills in by itself: new runs are picked up while TensorBoard is running.
        </p>
        <div className="grid two">
          <div>
            <h3 className="h3">With torch-prof's recorder</h3>
            <p className="muted small">Three lines in the training loop; never crashes the job, writes gzip'd traces atomically.</p>
            <pre className="code">
              <code>{RECORDER}</code>
            </pre>
          </div>
          <div>
            <h3 className="h3">With torch.profiler</h3>
            <p className="muted small">
              <span className="mono">tensorboard_trace_handler</span> writes one <span className="mono">*.pt.trace.json.gz</span> per worker and span.
            </p>
            <pre className="code">
              <code>{TORCH_PROFILER}</code>
            </pre>
          </div>
        </div>
        <p className="muted small">
          Then run <span className="mono">tensorboard --logdir logs</span> and come back to this tab. Files named{' '}
          <span className="mono">&lt;worker&gt;.&lt;timestamp&gt;.pt.trace.json[.gz]</span> are grouped into workers and spans.
        </p>
      </Card>
    </div>
  )
}
