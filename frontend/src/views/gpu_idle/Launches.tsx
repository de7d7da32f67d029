// Kernel launches panel of the GPU idle view: per kernel name, how long the launch calls took
// against how long the GPU ran the work, and the launches flagged as HTA flags them
// (/kernel_launch_summary, /kernel_launches?flag=..); each row opens the Trace view on the
// launch call through to the end of the device work.

import { useMemo } from 'preact/hooks';
import type { ViewProps } from '../../api/types';
import { typedRows, type RowOf, type WireTableOf } from '../../api/tables';
import { useApi } from '../../api/useApi';
import { formatDuration, formatNumber } from '../../base/format';
import { kernelNameColumn } from '../../components/KernelName';
import { Card, Loaded } from '../../components/Status';
import { DataTable, type Column } from '../../components/table/DataTable';
import { useUrlParam } from '../../components/useUrlParam';
import { showInTrace } from './link';

const FLAGS: [string, string][] = [
  ['launch_bound', 'Launch-bound (device time < launch call)'],
  ['runtime_outlier', 'Runtime outliers (launch call > 50 µs)'],
  ['launch_delay_outlier', 'Launch-delay outliers (> 100 µs after the call)'],
];

// Columns of either table: a key the table lacks, or whose cells are not numbers, is a type
// error where the column is listed (`Column<row of that table>`).
const us = <K extends string>(key: K, label: string) => ({ key, label, numeric: true, format: (v: number | null) => formatDuration(v) });
const count = <K extends string>(key: K, label: string) => ({ key, label, numeric: true, format: (v: number | null) => formatNumber(v) });

function traceLink<S extends string, E extends string>(start: S, end: E) {
  return {
    key: start,
    label: 'Trace',
    title: 'Open the Trace view from the launch call to the end of the device work',
    format: (v: number, r: Record<S | E, number>) => (
      <button type="button" class="link-button" style={{ whiteSpace: 'nowrap' }} data-control="launch-show-in-trace" onClick={() => showInTrace(r[start], r[end])}>
        {formatDuration(v)}
      </button>
    ),
  };
}

export function Launches(props: ViewProps) {
  const base = { run: props.run, worker: props.worker, span: props.span };
  const summary = useApi<'kernel_launch_summary', WireTableOf<'KernelLaunchSummaryTable'>>('kernel_launch_summary', base);
  const [flag, setFlag] = useUrlParam('launch_flag', 'launch_bound');
  const chosen = FLAGS.some(([f]) => f === flag) ? flag : 'launch_bound';
  const flagged = useApi<'kernel_launches', WireTableOf<'KernelLaunchesTable'>>('kernel_launches', { ...base, flag: chosen });
  // the kernel name comes first in both tables, shortened over the rows each shows
  const summaryColumns: Column<RowOf<'KernelLaunchSummaryTable'>>[] = [
    count('launches', 'Launches'),
    count('launch_bound', 'Launch-bound'),
    us('device_mean_us', 'Mean device'),
    us('runtime_mean_us', 'Mean call'),
    us('launch_delay_mean_us', 'Mean delay'),
    count('launch_delay_outliers', 'Delayed'),
    { ...traceLink('first_launch_start_us', 'last_device_end_us'), title: 'Open the Trace view from its first launch to the end of its last run' },
  ];
  const launchColumns: Column<RowOf<'KernelLaunchesTable'>>[] = [
    { key: 'operator', label: 'Operator' },
    us('runtime_us', 'Call'),
    us('device_us', 'Device'),
    us('launch_delay_us', 'Delay'),
    traceLink('launch_start_us', 'device_end_us'),
    { key: 'correlation', label: 'Correlation', numeric: true },
  ];
  return (
    <>
      <Card title="Kernel launches per kernel">
        <Loaded state={summary}>
          {(table) => <Summary table={table} columns={summaryColumns} name={`${props.run}_${props.worker}_${props.span}_kernel_launch_summary.csv`} />}
        </Loaded>
        <div class="hint">
          Launch delay: device start minus the launch call’s start. Launch-bound: the device ran the work for less time than the call (within 50 µs) took to
          launch it; many of them make a step host-bound (CUDA graphs or torch.compile launch fewer, larger pieces). Flags as Holistic Trace Analysis’s
          kernel launch statistics.
        </div>
      </Card>
      <Card title="Flagged launches" panel="launches">
        <div class="toolbar">
          <label>
            Show
            <select data-control="launch_flag" value={chosen} onChange={(e) => setFlag((e.target as HTMLSelectElement).value)}>
              {FLAGS.map(([f, label]) => (
                <option value={f}>{label}</option>
              ))}
            </select>
          </label>
        </div>
        <Loaded state={flagged}>
          {(table) => <FlaggedLaunches table={table} columns={launchColumns} name={`${props.run}_${props.worker}_${props.span}_kernel_launches_${chosen}.csv`} flag={chosen} />}
        </Loaded>
      </Card>
    </>
  );
}

function Summary({ table, columns, name }: { table: WireTableOf<'KernelLaunchSummaryTable'>; columns: Column<RowOf<'KernelLaunchSummaryTable'>>[]; name: string }) {
  const rows = useMemo(() => typedRows(table), [table]);
  return (
    <DataTable
      id="kernel-launch-summary"
      schema="KernelLaunchSummaryTable"
      rows={rows}
      columns={[kernelNameColumn('name', 'Name', rows), ...columns]}
      csvColumns={table.columns}
      csvName={name}
      searches={[{ label: 'Search kernels', keys: ['name'] }]}
      defaultSort={{ key: 'launch_bound', dir: 'desc' }}
      rowKey={(r) => `${r.name}|${r.kind}`}
    />
  );
}

function FlaggedLaunches({ table, columns, name, flag }: { table: WireTableOf<'KernelLaunchesTable'>; columns: Column<RowOf<'KernelLaunchesTable'>>[]; name: string; flag: string }) {
  const rows = useMemo(() => typedRows(table), [table]);
  return (
    <DataTable
      id="kernel-launches"
      schema="KernelLaunchesTable"
      key={flag}
      rows={rows}
      columns={[kernelNameColumn('name', 'Name', rows), ...columns]}
      csvColumns={table.columns}
      csvName={name}
      searches={[{ label: 'Search kernels', keys: ['name'] }, { label: 'Search operators', keys: ['operator'] }]}
      defaultSort={{ key: 'launch_delay_us', dir: 'desc' }}
      rowKey={(r) => `${r.correlation}|${r.name}|${r.device_start_us}`}
    />
  );
}
