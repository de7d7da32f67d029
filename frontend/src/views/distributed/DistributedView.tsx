// Distributed view: every worker of the run for the selected span. Device information per
// worker; computation / overlap / communication / other per worker (mean of all steps, or one
// step); time in collectives split into data transfer and synchronizing (waiting for the
// other ranks); communication time per process group; FSDP's per-step breakdown (for traces
// with FSDP:: annotations); the collectives table, each named by what the program asked for
// with the backend's op beside it. Above them, when a worker's trace did not load, how many
// workers the view covers and which did not load, and why.

import { useMemo } from 'preact/hooks';
import type { ViewProps } from '../../api/types';
import { typedRows, type RowOf, type WireTableOf } from '../../api/tables';
import { useApi } from '../../api/useApi';
import { durationTicks, formatBandwidth, formatBytes, formatDuration, formatNumber, formatPct } from '../../base/format';
import { Chart } from '../../components/charts/Chart';
import { stackedBarOption } from '../../components/charts/options';
import { RankCoverage } from '../../components/RankCoverage';
import { Card, Empty, Loaded } from '../../components/Status';
import { DataTable, type Column } from '../../components/table/DataTable';
import { useUrlParam } from '../../components/useUrlParam';

/** The tables this view shows; not `calls` (one row per collective call per worker: large
 * for many ranks, and only for CSV export or the API). */
interface DistributedReply {
  steps: WireTableOf<'DistributedStepsTable'>;
  all_steps: WireTableOf<'DistributedAllStepsTable'>;
  collectives: WireTableOf<'DistributedCollectivesTable'>;
  collective_time: WireTableOf<'DistributedCollectiveTimeTable'>;
  groups: WireTableOf<'DistributedGroupsTable'>;
  fsdp: WireTableOf<'DistributedFsdpTable'>;
  devices: WireTableOf<'DistributedDevicesTable'>;
  coverage: WireTableOf<'RankCoverageTable'>;
  missing: WireTableOf<'MissingRanksTable'>;
}

const PARTS: ['computation_us' | 'overlap_us' | 'communication_us' | 'other_us', string, string][] = [
  ['computation_us', 'Computation', '#5470c6'],
  ['overlap_us', 'Overlapping', '#91cc75'],
  ['communication_us', 'Communication', '#ee6666'],
  ['other_us', 'Other', '#fac858'],
];

export function DistributedView(props: ViewProps) {
  const state = useApi<'distributed', DistributedReply>('distributed', { run: props.run, span: props.span, tables: 'steps,all_steps,collectives,collective_time,groups,fsdp,devices,coverage,missing' });
  return (
    <div class="stack" data-testid="distributed">
      <Loaded state={state}>{(data) => <Distributed data={data} name={`${props.run}_${props.span}`} />}</Loaded>
    </div>
  );
}

function Distributed({ data, name }: { data: DistributedReply; name: string }) {
  const [stepParam, setStep] = useUrlParam('step', 'all');
  const steps = useMemo(() => typedRows(data.steps), [data]);
  const allSteps = useMemo(() => typedRows(data.all_steps), [data]);
  const collectives = useMemo(() => typedRows(data.collectives), [data]);
  const devices = useMemo(() => typedRows(data.devices), [data]);
  const groups = useMemo(() => typedRows(data.groups), [data]);
  const fsdp = useMemo(() => typedRows(data.fsdp), [data]);
  const unnamedGroup = groups.some((r) => r.process_group === '' && Number(r.calls) > 0);
  const stepNumbers = [...new Set(steps.map((r) => String(r.step)))].sort((a, b) => Number(a) - Number(b));
  const step = stepNumbers.includes(stepParam) ? stepParam : 'all';
  const overlapRows: (RowOf<'DistributedAllStepsTable'> | RowOf<'DistributedStepsTable'>)[] = step === 'all' ? allSteps : steps.filter((r) => String(r.step) === step);
  const workers = overlapRows.map((r) => String(r.worker));
  const overlap = useMemo(
    () => stackedBarOption(workers, PARTS.map(([key, label, color]) => ({ name: label, color, values: overlapRows.map((r) => r[key]) })), formatDuration, { xName: 'Worker', ticks: durationTicks }),
    [data, step],
  );
  // only where some collective has no bandwidth for a reason the server gives
  const reasonColumn: Column<RowOf<'DistributedCollectivesTable'>>[] = collectives.some((r) => r.no_bandwidth_reason)
    ? [{ key: 'no_bandwidth_reason', label: 'Why no bandwidth', title: 'Why the transfer time or the bandwidths are empty (the server says)', format: (v) => String(v ?? '') }]
    : [];
  const transfer = useMemo(() => {
    // Summed per worker by the server (the `collective_time` table).
    const perWorker = typedRows(data.collective_time);
    const names = perWorker.map((r) => String(r.worker));
    return {
      names,
      option: stackedBarOption(
        names,
        [
          { name: 'Data transfer', color: '#5470c6', values: perWorker.map((r) => r.transfer_us) },
          { name: 'Synchronizing', color: '#ee6666', values: perWorker.map((r) => r.synchronizing_us) },
        ],
        formatDuration,
        { xName: 'Worker', ticks: durationTicks },
      ),
    };
  }, [data]);

  const coverage = typedRows(data.coverage)[0];
  return (
    <>
      {data.missing.rows.length > 0 && coverage ? <RankCoverage text={coverage.text} missing={data.missing} /> : null}
      <Card title="Workers">
        <DataTable
          id="distributed-devices"
          schema="DistributedDevicesTable"
          rows={devices}
          csvColumns={data.devices.columns}
          csvName={`${name}_devices.csv`}
          rowKey={(r) => String(r.worker)}
          columns={[
            { key: 'worker', label: 'Worker' },
            { key: 'backend', label: 'Backend' },
            { key: 'rank', label: 'Rank', numeric: true },
            { key: 'world_size', label: 'World size', numeric: true },
            { key: 'device_id', label: 'Device', numeric: true, format: (v) => (v === null || Number(v) < 0 ? 'CPU' : String(v)) },
            { key: 'device_name', label: 'Device name', format: (v) => (v ? String(v) : '—') },
            { key: 'memory_bytes', label: 'Memory', numeric: true, format: (v) => formatBytes(v) },
            { key: 'compute_capability', label: 'Compute capability', format: (v) => (v ? String(v) : '—') },
            { key: 'sm_count', label: 'SMs', numeric: true, format: (v) => formatNumber(v) },
          ]}
        />
      </Card>
      <div class="grid two">
        <Card title={`Computation / communication overlap per worker (${step === 'all' ? 'mean per step' : `step ${step}`})`}>
          <div class="toolbar">
            <label>
              Step
              <select data-control="step" value={step} onChange={(e) => setStep((e.target as HTMLSelectElement).value)}>
                <option value="all">All steps (mean)</option>
                {stepNumbers.map((s) => (
                  <option key={s} value={s}>Step {s}</option>
                ))}
              </select>
            </label>
          </div>
          {overlapRows.length ? <Chart option={overlap} height={320} label="Overlap per worker" /> : <Empty>No steps recorded.</Empty>}
        </Card>
        <Card title="Collectives: data transfer vs synchronizing (summed over the trace)">
          {transfer.names.length ? <Chart option={transfer.option} height={360} label="Transfer vs synchronizing" /> : <Empty>No collective communication recorded.</Empty>}
        </Card>
      </div>
      <Card title="Collectives">
        <DataTable
          id="collectives"
          schema="DistributedCollectivesTable"
          rows={collectives}
          csvColumns={data.collectives.columns}
          csvName={`${name}_collectives.csv`}
          searches={[{ label: 'Search collectives or workers', keys: ['name', 'worker'] }]}
          defaultSort={{ key: 'total_us', dir: 'desc' }}
          rowKey={(r) => `${r.worker}|${r.process_group}|${r.name}|${r.backend_name}`}
          columns={[
            { key: 'worker', label: 'Worker' },
            { key: 'process_group', label: 'Process group', format: groupName },
            { key: 'name', label: 'Collective', title: 'What the program asked for (c10d / _c10d_functional op, or record_param_comms)' },
            { key: 'backend_name', label: 'Backend op', title: "The backend's own op that ran it: gloo runs FSDP2's reduce_scatter as gloo:all_reduce", format: (v) => (v ? String(v) : '—') },
            { key: 'group_size', label: 'Ranks', numeric: true, format: (v) => (Number(v) < 0 ? '—' : formatNumber(v)) },
            { key: 'calls', label: 'Calls', numeric: true, format: (v) => formatNumber(v) },
            { key: 'size_bytes', label: 'Total size', numeric: true, format: (v) => formatBytes(v) },
            { key: 'mean_size_bytes', label: 'Mean size', numeric: true, format: (v) => formatBytes(v) },
            { key: 'total_us', label: 'Total time', numeric: true, format: (v) => formatDuration(v) },
            { key: 'mean_us', label: 'Mean time', numeric: true, format: (v) => formatDuration(v) },
            { key: 'transfer_us', label: 'Data transfer', numeric: true, format: (v) => formatDuration(v) },
            { key: 'synchronizing_us', label: 'Synchronizing', numeric: true, format: (v) => formatDuration(v) },
            { key: 'message_bytes', label: 'Message size (S)', numeric: true, title: "NCCL's S: the larger of input and output", format: (v) => formatBytes(v) },
            { key: 'algbw_gbps', label: 'Alg. bandwidth', numeric: true, format: (v) => formatBandwidth(v) },
            { key: 'wait_us', label: 'Host wait', numeric: true, format: (v) => formatDuration(v) },
            { key: 'busbw_gbps', label: 'Bus bandwidth', numeric: true, title: "algbw x NCCL's factor for the collective and group size (nccl-tests busbw)", format: (v) => formatBandwidth(v) },
            ...reasonColumn,
          ]}
        />
      </Card>
      <Card title="Communication per process group">
        {unnamedGroup ? (
          <p class="hint" data-testid="unnamed-group">
            This trace does not say which process group ran some collectives (shown as “unknown”): gloo on CPU writes no{' '}
            <code>record_param_comms</code>. Record with the NCCL backend, whose collectives carry{' '}
            <code>Process Group Name</code> and <code>Process Group Description</code>; the groups the job created are listed
            below from <code>distributedInfo.pg_config</code>.
          </p>
        ) : null}
        <DataTable
          id="process-groups"
          schema="DistributedGroupsTable"
          rows={groups}
          csvColumns={data.groups.columns}
          csvName={`${name}_groups.csv`}
          searches={[{ label: 'Search groups or workers', keys: ['process_group', 'worker'] }]}
          defaultSort={{ key: 'total_us', dir: 'desc' }}
          rowKey={(r) => `${r.worker}|${r.process_group}`}
          columns={[
            { key: 'worker', label: 'Worker' },
            { key: 'process_group', label: 'Process group', format: groupName },
            { key: 'group_size', label: 'Ranks', numeric: true, format: (v) => (Number(v) < 0 ? '—' : formatNumber(v)) },
            { key: 'ranks', label: 'Global ranks', format: (v) => (v ? String(v) : '—') },
            { key: 'calls', label: 'Calls', numeric: true, format: (v) => formatNumber(v) },
            { key: 'total_us', label: 'Total time', numeric: true, format: (v) => formatDuration(v) },
            { key: 'transfer_us', label: 'Data transfer', numeric: true, format: (v) => formatDuration(v) },
            { key: 'synchronizing_us', label: 'Synchronizing', numeric: true, format: (v) => formatDuration(v) },
            { key: 'share_pct', label: 'Share of communication', numeric: true, format: (v) => formatPct(v) },
          ]}
        />
      </Card>
      {fsdp.length ? (
        <Card title="FSDP per step">
          <DataTable
            id="fsdp"
            schema="DistributedFsdpTable"
            rows={step === 'all' ? fsdp : fsdp.filter((r) => String(r.step) === step)}
            csvColumns={data.fsdp.columns}
            csvName={`${name}_fsdp.csv`}
            searches={[{ label: 'Search phases or workers', keys: ['phase', 'worker'] }]}
            rowKey={(r) => `${r.worker}|${r.step}|${r.phase}`}
            caption="From FSDP's own FSDP:: annotations; exposed = communication that no computation overlapped. The step follows the selection above."
            columns={[
              { key: 'worker', label: 'Worker' },
              { key: 'step', label: 'Step', numeric: true },
              { key: 'phase', label: 'Phase' },
              { key: 'annotations', label: 'Annotations', numeric: true, format: (v) => formatNumber(v) },
              { key: 'host_us', label: 'Host time', numeric: true, format: (v) => formatDuration(v) },
              { key: 'communication_us', label: 'Communication', numeric: true, format: (v) => formatDuration(v) },
              { key: 'exposed_us', label: 'Exposed', numeric: true, format: (v) => formatDuration(v) },
            ]}
          />
        </Card>
      ) : null}
    </>
  );
}

/** A process group's description; "" is a group the trace does not name. */
function groupName(value: unknown): string {
  return value ? String(value) : 'unknown';
}
