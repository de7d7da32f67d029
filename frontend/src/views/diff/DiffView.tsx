// Diff view: the selected profile (A) against a second run/worker/span (B) picked here.
// Why the step time changed (Explanation.tsx), step breakdowns side by side, operator and
// kernel deltas (B − A), all per step.

import { useMemo } from 'preact/hooks';
import type { SpansReply, ViewProps } from '../../api/types';
import { typedRows, type WireTableOf } from '../../api/tables';
import { useApi } from '../../api/useApi';
import { axisText, formatDelta, formatDuration, formatNumber } from '../../base/format';
import { Chart } from '../../components/charts/Chart';
import { esc } from '../../components/charts/echarts';
import { STEP_CATEGORIES } from '../../components/charts/options';
import { Card, Empty, Loaded, Loading } from '../../components/Status';
import { kernelNameColumn } from '../../components/KernelName';
import { DataTable } from '../../components/table/DataTable';
import { anyNonZero } from '../../components/table/logic';
import { useUrlParam } from '../../components/useUrlParam';
import { Delta, Explanation, type ExplanationTables } from './Explanation';
import { RankChanges } from './Ranks';

/** "cpu_exec" → "CPU Exec", as the overview names the step categories. */
const CATEGORY_LABELS = new Map<string, string>([...STEP_CATEGORIES, ['total', 'Total']]);
const categoryLabel = (id: unknown) => CATEGORY_LABELS.get(String(id)) ?? String(id);
/** The noise rule's thresholds offered (% of A's mean step time); the API's default is 5. */
const THRESHOLDS = ['0.1', '0.5', '1', '2', '5', '10', '20'];

interface DiffReply extends ExplanationTables {
  operators: WireTableOf<'DiffOperatorsTable'>;
  kernels: WireTableOf<'DiffKernelsTable'>;
  steps: WireTableOf<'DiffStepsTable'>;
}

export function DiffView(props: ViewProps) {
  const [runParam, setRunB] = useUrlParam('run_b', '');
  const explicit = props.runs.find((r) => r.name === runParam);
  // Without a B in the URL, the server proposes one, with the reason (/diff_default).
  const proposal = useApi<'diff_default'>(explicit ? null : 'diff_default', { run: props.run, worker: props.worker, span: props.span });
  const proposed = !explicit && proposal.status === 'ok' ? proposal.data : null;
  const auto = proposed?.run_b ? { run: proposed.run_b, worker: proposed.worker_b ?? '', span: proposed.span_b ?? 1 } : null;
  const runInfoB = explicit ?? props.runs.find((r) => r.name === auto?.run);
  const [workerParam, setWorkerB] = useUrlParam('worker_b', '');
  const workerB = runInfoB?.workers.includes(workerParam) ? workerParam : auto?.worker ?? (runInfoB?.workers.includes(props.worker) ? props.worker : runInfoB?.workers[0] ?? '');
  const spansB = useApi<'spans', SpansReply>(runInfoB ? 'spans' : null, { run: runInfoB?.name, worker: workerB });
  const spanListB = spansB.status === 'ok' ? spansB.data.spans.map((s) => s.span) : [];
  // The same worker: its next span; the same run: A's span where that worker has it.
  const sameRun = runInfoB?.name === props.run;
  const fallbackSpan = auto ? auto.span : sameRun && workerB === props.worker ? spanListB.find((s) => s !== props.span) ?? props.span : sameRun && spanListB.includes(props.span) ? props.span : spanListB[0] ?? 1;
  const [spanParam, setSpanB] = useUrlParam('span_b', '');
  const spanB = spanListB.includes(Number(spanParam)) ? Number(spanParam) : fallbackSpan;
  const [thresholdParam, setThreshold] = useUrlParam('diff_threshold', '');
  const threshold = THRESHOLDS.includes(thresholdParam) ? thresholdParam : '5';
  const diff = useApi<'diff', DiffReply>(spansB.status === 'ok' && runInfoB ? 'diff' : null, {
    run: props.run,
    worker: props.worker,
    span: props.span,
    run_b: runInfoB?.name,
    worker_b: workerB,
    span_b: spanB,
    threshold_pct: threshold,
  });
  const labelA = `${props.run} / ${props.worker} / span ${props.span}`;
  const labelB = `${runInfoB?.name} / ${workerB} / span ${spanB}`;
  return (
    <div class="stack" data-testid="diff">
      <div class="toolbar">
        <span>
          <strong>A</strong>: {labelA}
        </span>
        <strong>B:</strong>
        <label>
          Run
          <select data-control="run_b" value={runInfoB?.name ?? ''} onChange={(e) => { setRunB((e.target as HTMLSelectElement).value); setWorkerB(null); setSpanB(null); }}>
            {runInfoB ? null : <option value="">— choose a run —</option>}
            {props.runs.map((r) => (
              <option key={r.name} value={r.name}>{r.name}</option>
            ))}
          </select>
        </label>
        <label>
          Worker
          <select data-control="worker_b" value={workerB} onChange={(e) => { setWorkerB((e.target as HTMLSelectElement).value); setSpanB(null); }}>
            {(runInfoB?.workers ?? []).map((w) => (
              <option key={w} value={w}>{w}</option>
            ))}
          </select>
        </label>
        <label>
          Span
          <select data-control="span_b" value={String(spanB)} onChange={(e) => setSpanB((e.target as HTMLSelectElement).value)}>
            {spanListB.map((s) => (
              <option key={s} value={String(s)}>{s}</option>
            ))}
          </select>
        </label>
        <label title="A change is a regression only above this share of A's mean step time (and outside both sides' step-to-step spread)">
          Regression threshold
          <select data-control="diff_threshold" value={threshold} onChange={(e) => setThreshold((e.target as HTMLSelectElement).value)}>
            {THRESHOLDS.map((t) => (
              <option key={t} value={t}>{t} %</option>
            ))}
          </select>
        </label>
        {auto && proposed ? <span class="hint" data-testid="diff-default-reason">B by default: {proposed.reason}.</span> : null}
      </div>
      {!explicit && proposal.status === 'loading' ? <Loading label="Looking for a profile comparable with A…" /> : null}
      {proposal.status === 'error' ? <Empty>{proposal.error}</Empty> : null}
      {proposed && !auto ? (
        <div class="status empty" data-testid="diff-nothing-comparable">
          Nothing comparable with A: {proposed.reason}. Choose B above to compare anyway.
        </div>
      ) : null}
      {spansB.status === 'error' ? <Empty>{spansB.error}</Empty> : null}
      {/* several workers on both sides: two runs, or two spans of one run, rank by rank */}
      {runInfoB && (runInfoB.name !== props.run || spanB !== props.span) && runInfoB.workers.length > 1 && (props.runs.find((r) => r.name === props.run)?.workers.length ?? 0) > 1 ? (
        <RankChanges pair={{ runA: props.run, spanA: props.span, runB: runInfoB.name, spanB: spanB, worker: props.worker, threshold }} />
      ) : null}
      {runInfoB ? (
        <Loaded state={diff}>
          {(data) => {
            const name = `${props.run}_${props.worker}_${props.span}_vs_${runInfoB.name}_${workerB}_${spanB}`;
            return (
              <>
                <Explanation data={data} a={{ run: props.run, worker: props.worker, span: props.span }} b={{ run: runInfoB.name, worker: workerB, span: spanB }} name={name} />
                <Diff data={data} labelA={labelA} labelB={labelB} name={name} />
              </>
            );
          }}
        </Loaded>
      ) : null}
    </div>
  );
}

function Diff({ data, labelA, labelB, name }: { data: DiffReply; labelA: string; labelB: string; name: string }) {
  const steps = useMemo(() => typedRows(data.steps), [data]);
  const operators = useMemo(() => typedRows(data.operators), [data]);
  const kernels = useMemo(() => typedRows(data.kernels), [data]);
  const shownSteps = steps.filter((r) => String(r.category) !== 'total');
  // As in the operator view: without device time on either side the device columns would be
  // zeros pushing the host deltas out of sight (the CSV keeps them).
  const withDevice = anyNonZero(operators, ['device_self_us_a', 'device_self_us_b', 'device_total_us_a', 'device_total_us_b']);
  const option = useMemo(
    () => ({
      tooltip: {
        trigger: 'axis',
        confine: true,
        formatter: (params: { axisValueLabel: string; seriesName: string; value: number; marker: string }[]) =>
          [`<b>${esc(params[0]?.axisValueLabel)}</b>`, ...params.map((p) => `${p.marker}${esc(p.seriesName)}: <b>${esc(formatDuration(p.value))}</b>`)].join('<br/>'),
      },
      legend: { top: 0 },
      grid: { left: 72, right: 24, top: 40, bottom: 64 },
      xAxis: { type: 'category', data: shownSteps.map((r) => categoryLabel(r.category)), axisLabel: { interval: 0, rotate: 30, fontSize: 11 } },
      yAxis: { type: 'value', axisLabel: { formatter: (v: number) => axisText(formatDuration(v)) } },
      series: [
        { name: `A: ${labelA}`, type: 'bar', data: shownSteps.map((r) => r.mean_us_a), itemStyle: { color: '#5470c6' } },
        { name: `B: ${labelB}`, type: 'bar', data: shownSteps.map((r) => r.mean_us_b), itemStyle: { color: '#fac858' } },
      ],
    }),
    [data],
  );
  // columns of any of the three tables: a key it lacks, or whose cells are not numbers, is a
  // type error where listed
  const us = <K extends string>(key: K, text: string, delta = false) => ({
    key,
    label: text,
    numeric: true,
    format: (v: number | null) => (delta ? <Delta us={v} /> : formatDuration(v)),
  });
  const count = <K extends string>(key: K, text: string, delta = false) => ({
    key,
    label: text,
    numeric: true,
    format: (v: number | null) => (delta ? formatDelta(v, formatNumber) : formatNumber(v)),
  });
  return (
    <>
      <div class="grid two">
        <Card title="Mean step time by category (per step)">
          {shownSteps.length ? <Chart option={option} height={320} label="Step breakdown A vs B" /> : <Empty>No steps.</Empty>}
        </Card>
        <Card title="Step breakdown (per step, B − A)">
          <DataTable
            id="diff-steps"
            schema="DiffStepsTable"
            rows={steps}
            csvColumns={data.steps.columns}
            csvName={`${name}_steps.csv`}
            rowKey={(r) => String(r.category)}
            columns={[{ key: 'category', label: 'Category', format: categoryLabel }, us('mean_us_a', 'A mean'), us('mean_us_b', 'B mean'), us('mean_us_delta', 'B − A', true)]}
          />
        </Card>
      </div>
      <Card title="Operators (per step, B − A)">
        {withDevice ? null : <div class="hint">No device time in either profile: host times only.</div>}
        <DataTable
          id="diff-operators"
          schema="DiffOperatorsTable"
          rows={operators}
          csvColumns={data.operators.columns}
          csvName={`${name}_operators.csv`}
          searches={[{ label: 'Search operators', keys: ['name'] }]}
          rowKey={(r) => String(r.name)}
          // The API's order, stated on a shown column: the largest change first.
          defaultSort={{ key: withDevice ? 'device_total_us_delta' : 'host_total_us_delta', dir: 'desc', magnitude: true }}
          columns={[
            { key: 'name', label: 'Operator' },
            // The changes first (the sorted one leading), so they are on screen in any window;
            // the two sides' values follow.
            ...(withDevice ? [us('device_total_us_delta', 'Device total Δ', true), us('device_self_us_delta', 'Device self Δ', true)] : []),
            us('host_total_us_delta', 'Host total Δ', true),
            us('host_self_us_delta', 'Host self Δ', true),
            count('calls_delta', 'Calls Δ', true),
            count('calls_a', 'Calls A mean/step'),
            count('calls_b', 'Calls B mean/step'),
            us('host_self_us_a', 'Host self A mean/step'),
            us('host_self_us_b', 'Host self B mean/step'),
            ...(withDevice ? [us('device_self_us_a', 'Device self A mean/step'), us('device_self_us_b', 'Device self B mean/step')] : []),
          ]}
        />
      </Card>
      <Card title="Kernels (per step, B − A)">
        {kernels.length ? (
          <DataTable
            id="diff-kernels"
            schema="DiffKernelsTable"
            rows={kernels}
            csvColumns={data.kernels.columns}
            csvName={`${name}_kernels.csv`}
            searches={[{ label: 'Search kernels', keys: ['name'] }]}
            rowKey={(r) => String(r.name)}
            defaultSort={{ key: 'total_us_delta', dir: 'desc', magnitude: true }}
            columns={[
              kernelNameColumn('name', 'Kernel', kernels),
              us('total_us_delta', 'Total Δ', true),
              count('calls_delta', 'Calls Δ', true),
              us('total_us_a', 'Total A mean/step'),
              us('total_us_b', 'Total B mean/step'),
              count('calls_a', 'Calls A mean/step'),
              count('calls_b', 'Calls B mean/step'),
            ]}
          />
        ) : (
          <Empty>Neither profile ran kernels.</Empty>
        )}
      </Card>
    </>
  );
}
