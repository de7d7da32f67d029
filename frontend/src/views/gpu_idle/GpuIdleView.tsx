// GPU idle view: why each device stream waits. Busy time and idle time split into host wait
// (the CPU had not launched the next kernel yet), kernel wait (short gaps between back-to-back
// kernels) and other, as Holistic Trace Analysis defines them (/idle_time), over the whole
// trace or per step; then kernel launch statistics (Launches.tsx) and launch queues and copy
// bandwidth over time (Queues.tsx), and repeated kernel sequences, the fusion candidates
// (Sequences.tsx), time per GPU user annotation (Annotations.tsx) and a step's critical path
// (CriticalPath.tsx). Each row links to the Trace
// view with its time range highlighted.

import { useMemo } from 'preact/hooks';
import type { ViewProps } from '../../api/types';
import { typedRows, type RowOf, type WireTableOf } from '../../api/tables';
import { useApi } from '../../api/useApi';
import { durationTicks, formatDuration, formatPct } from '../../base/format';
import { Chart } from '../../components/charts/Chart';
import { CATEGORY_COLORS, stackedBarOption } from '../../components/charts/options';
import { Card, Empty, Loaded } from '../../components/Status';
import { DataTable, type Column } from '../../components/table/DataTable';
import { useUrlParam } from '../../components/useUrlParam';
import { Annotations } from './Annotations';
import { CriticalPath } from './CriticalPath';
import { Launches } from './Launches';
import { Queues } from './Queues';
import { Sequences } from './Sequences';
import { showInTrace, streamColumn } from './link';

/** The parts of a stream's span (columns of /idle_time), in the order they are stacked. */
type Whole = WireTableOf<'IdleTimeTable'>;
type ByStep = WireTableOf<'IdleTimeByStepTable'>;
/** A row of either table: per step adds `step`. */
type IdleRow = RowOf<'IdleTimeTable'> & Partial<RowOf<'IdleTimeByStepTable'>>;
type TimeColumn = 'busy_us' | 'idle_us' | 'idle_host_wait_us' | 'idle_kernel_wait_us' | 'idle_other_us';

function isByStep(table: Whole | ByStep): table is ByStep {
  return table.columns[0] === 'step';
}

const PARTS: [TimeColumn, string, string][] = [
  ['busy_us', 'Busy', CATEGORY_COLORS[0]],
  ['idle_host_wait_us', 'Idle: host wait', CATEGORY_COLORS[6]],
  ['idle_kernel_wait_us', 'Idle: kernel wait', CATEGORY_COLORS[5]],
  ['idle_other_us', 'Idle: other', CATEGORY_COLORS[3]],
];

export function GpuIdleView(props: ViewProps) {
  const [byStep, setByStep] = useUrlParam('idle_by_step', '0');
  const perStep = byStep === '1';
  const idle = useApi<'idle_time', Whole | ByStep>('idle_time', { run: props.run, worker: props.worker, span: props.span, by_step: perStep ? 'true' : 'false' });
  return (
    <div class="stack" data-testid="gpu_idle">
      <div class="toolbar">
        <label>
          <input type="checkbox" data-control="idle_by_step" checked={perStep} onChange={(e) => setByStep((e.target as HTMLInputElement).checked ? '1' : '0')} />
          Per step
        </label>
      </div>
      <Loaded state={idle}>{(table) => <IdleTime {...props} table={table} perStep={perStep} />}</Loaded>
      <Launches {...props} />
      <Queues {...props} />
      <Sequences {...props} />
      <Annotations {...props} />
      <CriticalPath {...props} />
    </div>
  );
}

function streamLabel(r: IdleRow, perStep: boolean): string {
  return `${perStep ? `step ${r.step} · ` : ''}GPU ${r.device} stream ${r.stream}`;
}

function IdleTime(props: ViewProps & { table: Whole | ByStep; perStep: boolean }) {
  const { table, perStep } = props;
  const rows = useMemo((): IdleRow[] => (isByStep(table) ? typedRows(table) : typedRows(table)), [table]);
  const bars = useMemo(
    () =>
      stackedBarOption(
        rows.map((r) => streamLabel(r, perStep)),
        PARTS.map(([key, name, color]) => ({ name, color, values: rows.map((r) => r[key] || 0) })),
        formatDuration,
        { horizontal: true, ticks: durationTicks },
      ),
    [rows, perStep],
  );
  const us = (key: TimeColumn, label: string): Column<IdleRow> => ({ key, label, numeric: true, format: (v) => formatDuration(v) });
  const stepColumn: Column<IdleRow>[] = perStep ? [{ key: 'step', label: 'Step', numeric: true }] : [];
  const columns: Column<IdleRow>[] = [
    streamColumn,
    ...stepColumn,
    us('busy_us', 'Busy'),
    us('idle_us', 'Idle'),
    { key: 'idle_pct', label: 'Idle %', numeric: true, format: (v) => formatPct(v) },
    us('idle_host_wait_us', 'Host wait'),
    us('idle_kernel_wait_us', 'Kernel wait'),
    us('idle_other_us', 'Other'),
    {
      key: 'start_us',
      label: 'Span',
      title: 'From the stream’s first activity to the end of its last one (per step: within the step); opens the Trace view on it',
      format: (v, r) => (
        <button type="button" class="link-button" data-control="idle-show-in-trace" onClick={() => showInTrace(r.start_us, r.end_us)}>
          {formatDuration(v)} – {formatDuration(r.end_us)}
        </button>
      ),
    },
  ];
  if (!rows.length) return <Empty>No kernels, memcpys or memsets in this trace.</Empty>;
  const height = Math.min(80 + rows.length * 28, 600);
  return (
    <>
      <Card title="Busy and idle time per stream (each over its own span)" panel="idle">
        <Chart option={bars} height={height} label="Idle time per stream" />
        <div class="hint">
          Host wait: the stream ran dry because the CPU launched the next kernel only after the previous one ended (host-bound; CUDA graphs or
          torch.compile cut launch overhead). Kernel wait: other gaps under 30 µs between back-to-back kernels. Other: waits on events, other streams,
          synchronisation. Definitions as Holistic Trace Analysis’s idle time breakdown. Each stream is measured over its own span, and streams wait at the same
          time: summed over streams, idle time can exceed the profiled time.
        </div>
      </Card>
      <Card title="Idle time">
        <DataTable
          id="idle_time"
          schema={perStep ? 'IdleTimeByStepTable' : 'IdleTimeTable'}
          key={perStep ? 'step' : 'whole'}
          rows={rows}
          columns={columns}
          csvColumns={table.columns}
          csvName={`${props.run}_${props.worker}_${props.span}_idle_time${perStep ? '_by_step' : ''}.csv`}
          defaultSort={{ key: 'idle_us', dir: 'desc' }}
          rowKey={(r) => `${r.step ?? ''}|${r.device}|${r.stream}`}
        />
      </Card>
    </>
  );
}
