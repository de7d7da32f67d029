// Overview: environment, GPU summary cards, execution summary (table + pie), per-step
// stacked breakdown and the recommendations.

import { useMemo } from 'preact/hooks';
import type { OverviewReply, Recommendation, ViewProps } from '../../api/types';
import { splitByNames } from '../../base/names';
import { KernelName } from '../../components/KernelName';
import { columnDoc, typedRows, type RowOf, type WireTableOf } from '../../api/tables';
import { useApi } from '../../api/useApi';
import { inReport } from '../../api/client';
import { durationTicks, formatBytes, formatDuration, formatPct, formatTflops } from '../../base/format';
import { setParams } from '../../base/url';
import { Chart } from '../../components/charts/Chart';
import { STEP_CATEGORIES, categoryColor, stackedBarOption } from '../../components/charts/options';
import { Pie } from '../../components/charts/Pie';
import { Card, Empty, Loaded } from '../../components/Status';
import { TraceHealth } from '../../components/TraceHealth';
import { DataTable } from '../../components/table/DataTable';

/** Step categories in the order of /steps (columns `<id>_us`). */
const CATEGORIES = STEP_CATEGORIES.map(([id, label]) => [`${id}_us` as const, label, id] as const);

export function OverviewView({ run, worker, span, runs }: ViewProps) {
  const state = useApi<'overview', OverviewReply>('overview', { run, worker, span });
  // torch.compile: share of the step inside compiled regions (one row; regions 0 when none)
  const compiled = useApi<'compiled', WireTableOf<'CompiledShareTable'>>('compiled', { run, worker, span, table: 'share' });
  const compiledShare = compiled.status === 'ok' ? typedRows(compiled.data)[0] ?? null : null;
  // model FLOPs utilisation per step
  const flops = useApi<'flops', WireTableOf<'FlopsStepsTable'>>('flops', { run, worker, span, table: 'steps' });
  const mfu = flops.status === 'ok' ? typedRows(flops.data) : [];
  // trace health: validator rules, import repairs and losses, odd events (collapsed when clean)
  const health = useApi<'health'>('health', { run, worker, span });
  // SM throughput and occupancy counters' mean per step (no rows: the trace has none)
  const counters = useApi<'step_counters'>('step_counters', { run, worker, span });
  const stepCounters = counters.status === 'ok' ? typedRows(counters.data) : [];
  const workers = runs.find((r) => r.name === run)?.workers.length ?? 1;
  return (
    <Loaded state={state}>
      {(data) => (
        <>
          {health.status === 'ok' ? <TraceHealth rows={typedRows(health.data)} name={`${run}_${worker}_${span}`} /> : null}
          <Overview data={data} name={`${run}_${worker}_${span}`} workers={workers} compiled={compiledShare} mfu={mfu} stepCounters={stepCounters} />
        </>
      )}
    </Loaded>
  );
}

/** Model FLOPs utilisation of the steps, or why it is unknown or withheld (the server says
 * why); "" when no step has FLOPs. The share of the kernel time the counted ops ran is the
 * server's coverage_pct. */
function mfuText(steps: RowOf<'FlopsStepsTable'>[]): string {
  const counted = steps.filter((r) => Number(r.flops) > 0);
  if (!counted.length) return '';
  const known = counted.filter((r) => r.mfu_pct !== null && r.mfu_pct !== undefined);
  const rates = counted.map((r) => formatTflops(r.tflops_per_s)).join(', ');
  const coverage = counted.filter((r) => r.coverage_pct !== null && r.coverage_pct !== undefined);
  const covered = coverage.length
    ? `; the counted ops ran ${coverage.map((r) => formatPct(r.coverage_pct)).join(', ')} of the step's kernel time`
    : '';
  const withheld = counted.find((r) => r.mfu_withheld);
  if (!known.length && withheld) return `withheld: ${String(withheld.mfu_withheld)} (${rates} per step)`;
  if (!known.length) {
    const device = String(counted[0].device_name || '');
    return `${rates} per step; peak unknown (${device ? `${device}, ${counted[0].dtype}` : 'no GPU in this trace'})`;
  }
  const uncounted = Math.max(...counted.map((r) => Number(r.uncounted_calls) || 0));
  return `${known.map((r) => formatPct(r.mfu_pct, 2)).join(', ')} per step (${counted[0].dtype} peak of ${counted[0].device_name})` +
    covered + (withheld ? `; withheld for some steps: ${String(withheld.mfu_withheld)}` : '') +
    (uncounted > 0 ? `; understated: up to ${uncounted} calls per step have no FLOP count (record with record_shapes=True)` : '');
}

/** "47.6 % of step time in compiled regions (compiled 833.2 µs, eager 916.5 µs over all
 * profiled steps); 1 frame recompiled" from the compiled view's share row (totals, not the
 * per-step means beside it); "" without compiled regions. */
function compiledText(share: RowOf<'CompiledShareTable'> | null): string {
  if (!share || !(Number(share.regions) > 0)) return '';
  const recompiled = Number(share.recompiled_frames);
  return `${formatPct(share.compiled_pct)} of step time in compiled regions (compiled ${formatDuration(share.compiled_us)}, eager ${formatDuration(share.eager_us)} over all profiled steps)` +
    (recompiled > 0 ? `; ${recompiled} frame${recompiled > 1 ? 's' : ''} recompiled` : '');
}

function Overview({ data, name, workers, compiled, mfu, stepCounters }: { data: OverviewReply; name: string; workers: number; compiled: RowOf<'CompiledShareTable'> | null; mfu: RowOf<'FlopsStepsTable'>[]; stepCounters: RowOf<'StepCountersTable'>[] }) {
  const gpus = typedRows(data.gpu_summary);
  const steps = typedRows(data.steps);
  const total = data.step_mean.total_us ?? 0;
  // The server computes the mean step by category; the page only names the categories.
  const labels = new Map<string, string>(STEP_CATEGORIES);
  // Categories with no time in any step say nothing (a CPU-only run has no kernel, memcpy,
  // memset or communication time): they are left out of the table as of the pie.
  const summary = typedRows(data.step_summary)
    .filter((r) => r.mean_us !== 0)
    .map((r) => ({ ...r, id: r.category, category: labels.get(r.category) ?? r.category }));
  // Categories with time, each in its fixed colour (the legend lists exactly these).
  const pie = useMemo(() => {
    const shown = summary.map((r) => ({ name: r.category, value: r.mean_us, color: categoryColor(r.id) })).filter((s) => s.value > 0);
    return { slices: shown.map(({ name, value }) => ({ name, value })), colors: shown.map((s) => s.color) };
  }, [data]);
  const bars = useMemo(
    () =>
      stackedBarOption(
        steps.map((r) => String(r.step)),
        CATEGORIES.map(([key, label, id]) => ({ name: label, key, color: categoryColor(id), values: steps.map((r) => r[key]) })).filter((s) => steps.some((r) => Number(r[s.key]) > 0)),
        formatDuration,
        { xName: 'Step', ticks: durationTicks },
      ),
    [data],
  );
  const env = data.environment;
  const breakdown = (
    <Card title="Step time breakdown">
      {steps.length ? <Chart option={bars} height={320} label="Step time breakdown" /> : <Empty>No ProfilerStep annotations in this trace.</Empty>}
    </Card>
  );
  return (
    <div class="stack" data-testid="overview">
      <div class="grid two">
        <Card title="Configuration">
          <dl class="kv">
            <dt>Device type</dt>
            <dd data-field="device_type">{String(env.device_type ?? '—')}</dd>
            {env.host_name ? (<><dt>Host</dt><dd>{String(env.host_name)}</dd></>) : null}
            {env.PT_PROFILER_JOB_NAME ? (<><dt>Job</dt><dd data-field="job">{jobText(env)}</dd></>) : null}
            <dt>Steps</dt>
            <dd>{steps.length}</dd>
            <dt>Mean step time</dt>
            <dd data-field="step_mean_total">{formatDuration(total)}</dd>
            {distributedText(env.distributed) ? (
              <>
                <dt>Distributed</dt>
                <dd data-field="distributed">
                  {distributedText(env.distributed)}
                  {missingRanks(env.distributed, workers) ? (
                    <div class="hint" data-testid="missing-ranks">
                      Only {workers === 1 ? 'this rank’s trace is' : `${workers} ranks’ traces are`} in this run: the Distributed view shows
                      {workers === 1 ? ' its' : ' their'} collectives; put every rank’s trace in the run’s folder to compare the ranks.
                    </div>
                  ) : null}
                </dd>
              </>
            ) : null}
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
                    <dt>Memory</dt><dd>{formatBytes(gpu.memory_bytes)}</dd>
                    <dt>Compute capability</dt><dd>{String(gpu.compute_capability || '—')}</dd>
                    <Defined column="utilization_pct">GPU utilization</Defined><dd>{formatPct(gpu.utilization_pct)}</dd>
                    <Defined column="est_sm_efficiency_pct">Est. SM efficiency</Defined><dd>{formatPct(gpu.est_sm_efficiency_pct)}</dd>
                    <Defined column="est_achieved_occupancy_pct">Est. achieved occupancy</Defined><dd>{formatPct(gpu.est_achieved_occupancy_pct)}</dd>
                    <Defined column="tensor_core_kernel_pct">{`Kernel time on ${String(data.environment.matrix_unit ?? 'Tensor Cores')}`}</Defined><dd>{formatPct(gpu.tensor_core_kernel_pct)}</dd>
                  </dl>
                </div>
              ))}
            </div>
          )}
          <p class="hint" data-testid="definitions-note">
            A dotted name or column header shows its definition on hover. How every number of every view is computed, column by column:{' '}
            {inReport ? (
              <span data-control="definitions-link">the API description, <code>openapi.yaml</code> beside the plugin</span>
            ) : (
              <a href="openapi.yaml" target="_blank" rel="noopener" data-control="definitions-link">the API description</a>
            )}{' '}(each table's columns
            with their units and meaning; the views' docstrings in <code>tb_plugin/views/</code> give the details).
          </p>
        </Card>
      </div>
      <div class="grid two">
        <Card title="Execution summary (mean per step)">
          <DataTable
            id="execution-summary"
            schema="StepSummaryTable"
            csvName={`${name}_execution_summary.csv`}
            csvColumns={['category', 'mean_us', 'share_pct']}
            rows={summary}
            rowKey={(r) => String(r.category)}
            columns={[
              {
                key: 'category',
                label: 'Category',
                format: (v, r) => <span class="defined" title={columnDoc('StepBreakdownTable', `${r.id}_us`)}>{String(v)}</span>,
              },
              { key: 'mean_us', label: 'Mean time', numeric: true, format: (v) => formatDuration(v) },
              { key: 'share_pct', label: 'Share', numeric: true, format: (v) => formatPct(v) },
            ]}
          />
        </Card>
        <Card>
          {total > 0 ? <Pie title="Mean step time by category" slices={pie.slices} colors={pie.colors} format={formatDuration} height={240} label="Execution summary pie" /> : <Empty>No step time recorded.</Empty>}
        </Card>
      </div>
      {stepCounters.length ? (
        <div class="grid two">
          {breakdown}
          <StepCounters rows={stepCounters} name={name} />
        </div>
      ) : breakdown}
      <Card title="Recommendations">
        {data.recommendations.length === 0 ? <Empty>Nothing stands out.</Empty> : null}
        {data.recommendations.map((rec, index) => (
          <div key={`${rec.id}-${index}`} class={`recommendation ${rec.severity}`} data-recommendation={rec.id}>
            {rec.saving_us !== null ? (
              <strong data-field="saving">
                Could save up to {formatDuration(rec.saving_us)} per step ({stepsLabel(rec.steps)}).{' '}
              </strong>
            ) : rec.measured_us !== null ? (
              <strong data-field="measured">
                Measured: {formatDuration(rec.measured_us)} per step ({stepsLabel(rec.steps)}); no saving can be bounded.{' '}
              </strong>
            ) : null}
            <RecommendationText rec={rec} />
            {rec.evidence?.view ? (
              <>
                {' '}
                <button
                  type="button"
                  class="link-button"
                  data-control="recommendation-evidence"
                  onClick={() => setParams({ ...rec.evidence?.params, view: rec.evidence?.view, panel: rec.evidence?.panel ?? null })}
                >
                  Show the evidence
                </button>
              </>
            ) : null}
            {rec.docs ? (
              <>
                {' '}
                <a href={rec.docs} target="_blank" rel="noopener noreferrer" data-control="recommendation-docs">
                  PyTorch documentation
                </a>
              </>
            ) : null}
            <div class="recommendation-condition" data-field="condition">Tested: {rec.condition}</div>
          </div>
        ))}
      </Card>
    </div>
  );
}

/** The hardware counters' mean per step, beside the step breakdown: SM throughput and
 *  occupancy (% of peak) as CUPTI PM sampling measured them. */
function StepCounters({ rows, name }: { rows: RowOf<'StepCountersTable'>[]; name: string }) {
  return (
    <Card title="SM counters per step (hardware counters)">
      <DataTable
        id="step-counters"
        schema="StepCountersTable"
        csvName={`${name}_step_counters.csv`}
        csvColumns={['step', 'device', 'counter', 'quantity', 'mean_pct', 'samples']}
        rows={rows}
        rowKey={(r) => `${r.step}/${r.device}/${r.counter}`}
        columns={[
          { key: 'step', label: 'Step', numeric: true, format: (v) => String(v) },
          { key: 'device', label: 'Device', format: (v) => `GPU ${String(v)}` },
          { key: 'quantity', label: 'Counter', format: (v, r) => <span class="defined" title={String(r.counter)} data-counter={String(r.counter)}>{String(v)}</span> },
          { key: 'mean_pct', label: 'Mean', numeric: true, format: (v) => formatPct(v) },
          { key: 'samples', label: 'Samples', numeric: true, format: (v) => String(v) },
        ]}
      />
    </Card>
  );
}

/** "mean of N steps" (or "1 step"), for the per-step figures of a recommendation. */
function stepsLabel(steps: number): string {
  return steps === 1 ? '1 step' : `mean of ${steps} steps`;
}

/** Whether the trace says it was one of more ranks than the run holds traces of. */
function missingRanks(info: unknown, workers: number): boolean {
  const size = Number((info as Record<string, unknown> | null)?.world_size);
  return Number.isFinite(size) && size > workers;
}

function distributedText(info: unknown): string {
  if (!info || typeof info !== 'object') return '';
  const d = info as Record<string, unknown>;
  const parts = [d.backend, d.rank !== undefined ? `rank ${d.rank}` : '', d.world_size !== undefined ? `of ${d.world_size}` : ''].filter(Boolean);
  return parts.join(' ');
}

/** The job the run was recorded as (Kineto's PT_PROFILER_JOB_* settings): "name, version V, attempt A". */
function jobText(env: Record<string, unknown>): string {
  const parts = [String(env.PT_PROFILER_JOB_NAME)];
  if (env.PT_PROFILER_JOB_VERSION !== undefined) parts.push(`version ${String(env.PT_PROFILER_JOB_VERSION)}`);
  if (env.PT_PROFILER_JOB_ATTEMPT_INDEX !== undefined) parts.push(`attempt ${String(env.PT_PROFILER_JOB_ATTEMPT_INDEX)}`);
  return parts.join(', ');
}

/** A recommendation's sentence, the kernel names it quotes in their short form (the full
 *  name a click away), as in the tables. */
function RecommendationText({ rec }: { rec: Recommendation }) {
  const kernels = rec.evidence?.kernels ?? [];
  return (
    <>
      {splitByNames(rec.text, kernels).map((part, i) => (typeof part === 'string' ? part : <KernelName key={i} name={part.name} names={kernels} />))}
    </>
  );
}

/** A GPU summary term, its tooltip the declaration's meaning of its column. */
function Defined({ column, children }: { column: string; children: string }) {
  return (
    <dt class="defined" title={columnDoc('GpuSummaryTable', column)} data-definition={columnDoc('GpuSummaryTable', column)}>
      {children}
    </dt>
  );
}
