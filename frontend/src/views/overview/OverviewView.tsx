// Overview: environment, GPU summary cards, execution summary (table + pie), per-step
// stacked breakdown and the recommendations.

import { useMemo } from 'preact/hooks';
import type { OverviewReply, ViewProps, WireTable } from '../../api/types';
import { useApi } from '../../api/useApi';
import { formatBytes, formatDuration, formatPct, formatTflops } from '../../base/format';
import { Chart } from '../../components/charts/Chart';
import { CATEGORY_COLORS, STEP_CATEGORIES, pieOption, stackedBarOption } from '../../components/charts/options';
import { Card, Empty, Loaded } from '../../components/Status';
import { DataTable } from '../../components/table/DataTable';
import { rowsOf, type Row } from '../../components/table/logic';

/** Step categories in the order of /steps (columns `<id>_us`). */
const CATEGORIES: [string, string][] = STEP_CATEGORIES.map(([id, label]) => [`${id}_us`, label]);

export function OverviewView({ run, worker, span }: ViewProps) {
  const state = useApi<OverviewReply>('overview', { run, worker, span });
  // torch.compile: share of the step inside compiled regions (one row; regions 0 when none)
  const compiled = useApi<WireTable>('compiled', { run, worker, span, table: 'share' });
  const compiledShare = compiled.status === 'ok' ? rowsOf(compiled.data)[0] ?? null : null;
  // model FLOPs utilisation per step
  const flops = useApi<WireTable>('flops', { run, worker, span, table: 'steps' });
  const mfu = flops.status === 'ok' ? rowsOf(flops.data) : [];
  return <Loaded state={state}>{(data) => <Overview data={data} name={`${run}_${worker}_${span}`} compiled={compiledShare} mfu={mfu} />}</Loaded>;
}

/** Model FLOPs utilisation of the steps, or why it is unknown; "" when no step has FLOPs. */
function mfuText(steps: Row[]): string {
  const counted = steps.filter((r) => Number(r.flops) > 0);
  if (!counted.length) return '';
  const known = counted.filter((r) => r.mfu_pct !== null && r.mfu_pct !== undefined);
  const rates = counted.map((r) => formatTflops(r.tflops_per_s as number)).join(', ');
  if (!known.length) {
    const device = String(counted[0].device_name || '');
    return `${rates} per step; peak unknown (${device ? `${device}, ${counted[0].dtype}` : 'no GPU in this trace'})`;
  }
  const uncounted = Math.max(...counted.map((r) => Number(r.uncounted_calls) || 0));
  return `${known.map((r) => formatPct(r.mfu_pct as number, 2)).join(', ')} per step (${counted[0].dtype} peak of ${counted[0].device_name})` +
    (uncounted > 0 ? `; understated: up to ${uncounted} calls per step have no FLOP count (record with a torch 2.x profiler and record_shapes=True)` : '');
}

/** "47.6 % of step time in compiled regions (eager: 916.5 µs); 1 frame recompiled" from the
 * compiled view's share row; "" without compiled regions. */
function compiledText(share: Row | null): string {
  if (!share || !(Number(share.regions) > 0)) return '';
  const recompiled = Number(share.recompiled_frames);
  return `${formatPct(share.compiled_pct as number)} of step time in compiled regions (eager: ${formatDuration(share.eager_us as number)})` +
    (recompiled > 0 ? `; ${recompiled} frame${recompiled > 1 ? 's' : ''} recompiled` : '');
}

function Overview({ data, name, compiled, mfu }: { data: OverviewReply; name: string; compiled: Row | null; mfu: Row[] }) {
  const gpus = rowsOf(data.gpu_summary);
  const steps = rowsOf(data.steps);
  const total = data.step_mean.total_us ?? 0;
  const summary: Row[] = CATEGORIES.map(([key, label]) => ({
    category: label,
    mean_us: data.step_mean[key] ?? 0,
    share_pct: total ? (100 * (data.step_mean[key] ?? 0)) / total : null,
  }));
  const pie = useMemo(() => pieOption('Mean step time by category', summary.map((r) => ({ name: String(r.category), value: Number(r.mean_us) })), formatDuration, CATEGORY_COLORS), [data]);
  const bars = useMemo(
    () =>
      stackedBarOption(
        steps.map((r) => String(r.step)),
        CATEGORIES.map(([key, label], i) => ({ name: label, key, color: CATEGORY_COLORS[i], values: steps.map((r) => r[key] as number) })).filter((s) => steps.some((r) => Number(r[s.key]) > 0)),
        formatDuration,
        { xName: 'Step' },
      ),
    [data],
  );
  const env = data.environment;
  return (
    <div class="stack" data-testid="overview">
      <div class="grid two">
        <Card title="Configuration">
          <dl class="kv">
            <dt>Device type</dt>
            <dd data-field="device_type">{String(env.device_type ?? '—')}</dd>
            {env.host_name ? (<><dt>Host</dt><dd>{String(env.host_name)}</dd></>) : null}
            <dt>Steps</dt>
            <dd>{steps.length}</dd>
            <dt>Mean step time</dt>
            <dd data-field="step_mean_total">{formatDuration(total)}</dd>
            {distributedText(env.distributed) ? (<><dt>Distributed</dt><dd>{distributedText(env.distributed)}</dd></>) : null}
            {compiledText(compiled) ? (<><dt>torch.compile</dt><dd data-field="compiled_share">{compiledText(compiled)}</dd></>) : null}
            {mfuText(mfu) ? (<><dt>Model FLOPs utilisation</dt><dd data-field="mfu">{mfuText(mfu)}</dd></>) : null}
          </dl>
        </Card>
        <Card title="GPU summary">
          {gpus.length === 0 ? (
            <Empty>No GPU activity in this trace.</Empty>
          ) : (
            <div class="cards">
              {gpus.map((gpu) => (
                <div class="gpu" key={String(gpu.device)} data-gpu={String(gpu.device)}>
                  {/* name and compute capability are "" when the trace has no deviceProperties */}
                  <div><strong>GPU {String(gpu.device)}{gpu.name ? `: ${String(gpu.name)}` : ''}</strong></div>
                  <dl class="kv">
                    <dt>Memory</dt><dd>{formatBytes(gpu.memory_bytes as number)}</dd>
                    <dt>Compute capability</dt><dd>{String(gpu.compute_capability || '—')}</dd>
                    <dt>GPU utilization</dt><dd>{formatPct(gpu.utilization_pct as number)}</dd>
                    <dt>Est. SM efficiency</dt><dd>{formatPct(gpu.est_sm_efficiency_pct as number)}</dd>
                    <dt>Est. achieved occupancy</dt><dd>{formatPct(gpu.est_achieved_occupancy_pct as number)}</dd>
                    <dt>Kernel time on Tensor Cores</dt><dd>{formatPct(gpu.tensor_core_kernel_pct as number)}</dd>
                  </dl>
                </div>
              ))}
            </div>
          )}
        </Card>
      </div>
      <div class="grid two">
        <Card title="Execution summary (mean per step)">
          <DataTable
            id="execution-summary"
            csvName={`${name}_execution_summary.csv`}
            csvColumns={['category', 'mean_us', 'share_pct']}
            rows={summary}
            rowKey={(r) => String(r.category)}
            columns={[
              { key: 'category', label: 'Category' },
              { key: 'mean_us', label: 'Time', numeric: true, format: (v) => formatDuration(v as number) },
              { key: 'share_pct', label: 'Share', numeric: true, format: (v) => formatPct(v as number) },
            ]}
          />
        </Card>
        <Card>
          {total > 0 ? <Chart option={pie} height={280} label="Execution summary pie" /> : <Empty>No step time recorded.</Empty>}
        </Card>
      </div>
      <Card title="Step time breakdown">
        {steps.length ? <Chart option={bars} height={320} label="Step time breakdown" /> : <Empty>No ProfilerStep annotations in this trace.</Empty>}
      </Card>
      <Card title="Recommendations">
        {data.recommendations.length === 0 ? <Empty>Nothing stands out.</Empty> : null}
        {data.recommendations.map((rec) => (
          <div key={rec.id} class={`recommendation ${rec.severity}`} data-recommendation={rec.id}>
            {rec.text}
          </div>
        ))}
      </Card>
    </div>
  );
}

function distributedText(info: unknown): string {
  if (!info || typeof info !== 'object') return '';
  const d = info as Record<string, unknown>;
  const parts = [d.backend, d.rank !== undefined ? `rank ${d.rank}` : '', d.world_size !== undefined ? `of ${d.world_size}` : ''].filter(Boolean);
  return parts.join(' ');
}
