// Job view: every rank of the run for the selected span, side by side. The verdict (which
// rank held the job back most, and why; the rule it applied; how many ranks it covers, naming
// each whose trace did not load), a rank x step heat map of one part of the step,
// the stragglers, kernels and operators across ranks, collectives matched across ranks with
// their arrival spread, the clock offset applied to each rank and each rank's trace health. Every number comes from
// /job; the page only colours and sorts. A click on a heat-map cell or a straggler opens
// that rank's Overview.

import { useCallback, useMemo } from 'preact/hooks';
import { typedRows, type RowOf, type WireTableOf } from '../../api/tables';
import type { ViewProps } from '../../api/types';
import { useApi } from '../../api/useApi';
import { formatBandwidth, formatBytes, formatDuration, formatPct } from '../../base/format';
import { setParams } from '../../base/url';
import { Chart, type ChartInstance } from '../../components/charts/Chart';
import { heatmapOption } from '../../components/charts/options';
import { kernelNameColumn } from '../../components/KernelName';
import { RankCoverage } from '../../components/RankCoverage';
import { Card, Empty, Loaded } from '../../components/Status';
import { TraceHealth } from '../../components/TraceHealth';
import { DataTable, type Column } from '../../components/table/DataTable';
import { useUrlParam } from '../../components/useUrlParam';

interface JobReply {
  verdict: WireTableOf<'JobVerdictTable'>;
  rank_steps: WireTableOf<'JobRankStepsTable'>;
  stragglers: WireTableOf<'JobStragglersTable'>;
  kernels: WireTableOf<'JobKernelsTable'>;
  operators: WireTableOf<'JobOperatorsTable'>;
  collectives: WireTableOf<'JobCollectivesTable'>;
  clocks: WireTableOf<'JobClocksTable'>;
  missing: WireTableOf<'MissingRanksTable'>;
  health: WireTableOf<'JobHealthTable'>;
}

/** The parts of a step the heat map can show (columns of rank_steps). */
const METRICS = [
  ['step_us', 'Step time'],
  ['compute_us', 'Compute'],
  ['exposed_comm_us', 'Exposed communication'],
  ['idle_us', 'Idle'],
  ['dataloader_us', 'Data loading'],
  ['host_us', 'Host / launch'],
] as const;
type Metric = (typeof METRICS)[number][0];

export function JobView(props: ViewProps) {
  const [align] = useUrlParam('align_clocks', 'true');
  const state = useApi<'job', JobReply>('job', { run: props.run, span: props.span, align_clocks: align === 'false' ? 'false' : 'true' });
  return (
    <div class="stack" data-testid="job">
      <Loaded state={state}>{(data) => <Job data={data} name={`${props.run}_${props.span}`} />}</Loaded>
    </div>
  );
}

/** The summary columns the kernels and operators across ranks share (`_ACROSS_RANKS` in views/job.py). */
type AcrossRanks = Pick<RowOf<'JobKernelsTable'>, 'ranks' | 'min_us' | 'median_us' | 'max_us' | 'spread_pct' | 'slowest_rank'>;
const ACROSS_RANKS: Column<AcrossRanks>[] = [
  { key: 'ranks', label: 'Ranks', numeric: true },
  { key: 'min_us', label: 'Min', numeric: true, format: (v) => formatDuration(v) },
  { key: 'median_us', label: 'Median', numeric: true, format: (v) => formatDuration(v) },
  { key: 'max_us', label: 'Max', numeric: true, format: (v) => formatDuration(v) },
  { key: 'spread_pct', label: 'Max over median', numeric: true, format: (v) => formatPct(v) },
  { key: 'slowest_rank', label: 'Slowest rank', numeric: true },
];

const openRank = (worker: string) => setParams({ worker, view: 'overview' });

function Job({ data, name }: { data: JobReply; name: string }) {
  const [metricParam, setMetric] = useUrlParam('job_metric', 'compute_us');
  const [align, setAlign] = useUrlParam('align_clocks', 'true');
  const metric: Metric = METRICS.some(([key]) => key === metricParam) ? (metricParam as Metric) : 'compute_us';
  const verdict = typedRows(data.verdict)[0];
  const rankSteps = useMemo(() => typedRows(data.rank_steps), [data]);
  const stragglers = useMemo(() => typedRows(data.stragglers), [data]);
  const clocks = useMemo(() => typedRows(data.clocks), [data]);
  const jobKernels = useMemo(() => typedRows(data.kernels), [data]);
  const workerOfRank = useMemo(() => new Map(clocks.map((c) => [c.rank, c.worker])), [clocks]);
  const heat = useMemo(() => {
    const ranks = [...new Set(rankSteps.map((r) => r.rank))].sort((a, b) => a - b);
    const steps = [...new Set(rankSteps.map((r) => r.step))].sort((a, b) => a - b);
    const marked = new Set(stragglers.map((s) => `${s.rank}|${s.step}`));
    const cells = rankSteps.map((r) => ({ x: steps.indexOf(r.step), y: ranks.indexOf(r.rank), value: r[metric], marked: marked.has(`${r.rank}|${r.step}`) }));
    const label = METRICS.find(([key]) => key === metric)![1];
    return {
      ranks,
      option: heatmapOption(steps.map(String), ranks.map((r) => `rank ${r}`), cells, formatDuration, { xName: 'Step', yName: 'Rank', valueName: label }),
    };
  }, [data, metric]);
  const heatHeight = Math.min(640, Math.max(200, 100 + heat.ranks.length * 18));
  const onHeatChart = useCallback(
    (chart: ChartInstance) => {
      chart.on('click', (p) => {
        const y = (p as { data?: { value?: number[] } }).data?.value?.[1];
        const worker = y === undefined ? undefined : workerOfRank.get(heat.ranks[y]);
        if (worker) openRank(worker);
      });
      return () => chart.off('click');
    },
    [heat, workerOfRank],
  );

  return (
    <>
      <Card title="Verdict">
        <p class={verdict && verdict.stragglers > 0 ? 'verdict warn' : 'verdict'} data-testid="job-verdict">
          {verdict ? verdict.text : 'No ranks.'}
        </p>
        {verdict && verdict.rule ? (
          <p class="hint verdict-rule" data-testid="job-rule">
            Rule applied: {verdict.rule}
          </p>
        ) : null}
        {verdict ? <RankCoverage text={verdict.coverage} missing={data.missing} /> : null}
      </Card>
      <TraceHealth rows={typedRows(data.health)} name={name} perRank ranks={verdict?.ranks} />
      <Card title="Where each rank's steps went">
        <div class="toolbar">
          <label>
            Show
            <select data-control="job_metric" value={metric} onChange={(e) => setMetric((e.target as HTMLSelectElement).value)}>
              {METRICS.map(([key, label]) => (
                <option key={key} value={key}>{label}</option>
              ))}
            </select>
          </label>
          <span class="hint">Outlined cells are stragglers; click a cell to open that rank.</span>
        </div>
        {rankSteps.length ? (
          <Chart
            option={heat.option}
            height={heatHeight}
            label="Rank by step heat map"
            testId="job-heatmap"
            onChart={onHeatChart}
          />
        ) : (
          <Empty>No steps recorded.</Empty>
        )}
      </Card>
      <Card title="Stragglers">
        {stragglers.length ? (
          <DataTable
            id="job-stragglers"
            schema="JobStragglersTable"
            rows={stragglers}
            csvColumns={data.stragglers.columns}
            csvName={`${name}_stragglers.csv`}
            rowKey={(r) => `${r.rank}|${r.step}`}
            columns={[
              { key: 'rank', label: 'Rank', numeric: true },
              { key: 'worker', label: 'Worker', format: (v) => <a href="#" onClick={(e) => { e.preventDefault(); openRank(v); }}>{v}</a> },
              { key: 'step', label: 'Step', numeric: true },
              { key: 'measure', label: 'Longer' },
              { key: 'excess_us', label: 'Excess', numeric: true, format: (v) => formatDuration(v) },
              { key: 'excess_pct', label: '% of median step', numeric: true, format: (v) => formatPct(v) },
              { key: 'deviations', label: 'Robust deviations', numeric: true, format: (v) => (v === null ? 'others equal' : v.toFixed(1)) },
              { key: 'flagged_by', label: 'Flagged by' },
              { key: 'cause', label: 'Cause' },
              { key: 'host_range', label: 'In the trace' },
              { key: 'detail', label: 'Numbers behind it' },
            ]}
          />
        ) : (
          <Empty>No straggler: the verdict's rule above says what was tested and the largest excess found.</Empty>
        )}
      </Card>
      <div class={data.kernels.rows.length ? 'grid two' : 'stack'}>
        {data.kernels.rows.length > 0 && (
        <Card title="Kernels across ranks">
          <DataTable
            id="job-kernels"
            schema="JobKernelsTable"
            rows={jobKernels}
            csvColumns={data.kernels.columns}
            csvName={`${name}_kernels_across_ranks.csv`}
            defaultSort={{ key: 'spread_pct', dir: 'desc' }}
            rowKey={(r) => r.name}
            columns={[
              kernelNameColumn('name', 'Kernel', jobKernels),
              ...ACROSS_RANKS,
            ]}
          />
        </Card>
        )}
        <Card title="Operators across ranks">
          <DataTable
            id="job-operators"
            schema="JobOperatorsTable"
            rows={typedRows(data.operators)}
            csvColumns={data.operators.columns}
            csvName={`${name}_operators_across_ranks.csv`}
            defaultSort={{ key: 'spread_pct', dir: 'desc' }}
            rowKey={(r) => `${r.name}|${r.measure}`}
            columns={[
              { key: 'name', label: 'Operator' },
              { key: 'measure', label: 'Time', format: (v) => (v === 'device_self' ? 'Device self' : 'Host self') },
              ...ACROSS_RANKS,
            ]}
          />
        </Card>
      </div>
      <Card title="Collectives across ranks">
        <DataTable
          id="job-collectives"
          schema="JobCollectivesTable"
          rows={typedRows(data.collectives)}
          csvColumns={data.collectives.columns}
          csvName={`${name}_collectives_across_ranks.csv`}
          defaultSort={{ key: 'arrival_spread_us', dir: 'desc' }}
          rowKey={(r) => `${r.match_group}|${r.match_index}`}
          columns={[
            { key: 'name', label: 'Collective' },
            { key: 'match_group', label: 'Group' },
            { key: 'match_index', label: 'Seq / #', numeric: true },
            { key: 'ranks', label: 'Ranks', numeric: true },
            { key: 'arrival_spread_us', label: 'Arrival spread', numeric: true, format: (v) => formatDuration(v) },
            { key: 'last_rank', label: 'Last to arrive', numeric: true },
            { key: 'size_bytes', label: 'Size', numeric: true, format: (v) => formatBytes(v) },
            { key: 'transfer_us', label: 'Transfer', numeric: true, format: (v) => formatDuration(v) },
            { key: 'algbw_gbps', label: 'Alg. bandwidth', numeric: true, format: (v) => formatBandwidth(v) },
            { key: 'busbw_gbps', label: 'Bus bandwidth', numeric: true, format: (v) => formatBandwidth(v) },
            { key: 'no_bandwidth_reason', label: 'Why no bandwidth', format: (v) => String(v ?? '') },
          ]}
        />
      </Card>
      <Card title="Clock alignment">
        <div class="toolbar">
          <label>
            <input type="checkbox" data-control="align_clocks" checked={align !== 'false'} onChange={(e) => setAlign((e.target as HTMLInputElement).checked ? 'true' : 'false')} />
            Align rank clocks by the ends of matched collectives
          </label>
        </div>
        <DataTable
          id="job-clocks"
          schema="JobClocksTable"
          rows={clocks}
          csvColumns={data.clocks.columns}
          csvName={`${name}_clocks.csv`}
          rowKey={(r) => String(r.rank)}
          columns={[
            { key: 'rank', label: 'Rank', numeric: true },
            { key: 'worker', label: 'Worker' },
            { key: 'offset_us', label: 'Offset applied', numeric: true, format: (v) => formatDuration(v) },
            { key: 'matched_calls', label: 'Calls matched', numeric: true },
            { key: 'aligned', label: 'Aligned', format: (v) => (v ? 'yes' : 'no') },
          ]}
        />
      </Card>
    </>
  );
}
