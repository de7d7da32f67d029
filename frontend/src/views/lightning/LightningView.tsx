// Lightning view: time per PyTorch Lightning hook (training_step, backward, optimizer_step,
// dataloader next, ...) from the [pl][profile] ranges Lightning's PyTorchProfiler records.
// Offered only for traces that hold them.

import { useMemo } from 'preact/hooks';
import type { ViewProps } from '../../api/types';
import { typedRows, type WireTableOf } from '../../api/tables';
import { useApi } from '../../api/useApi';
import { durationTicks, formatDuration, formatNumber, formatPct } from '../../base/format';
import { Chart } from '../../components/charts/Chart';
import { stackedBarOption } from '../../components/charts/options';
import { Card, Empty, Loaded } from '../../components/Status';
import { DataTable } from '../../components/table/DataTable';

/** Hooks drawn in the chart (the table has all). */
const CHART_HOOKS = 15;

export function LightningView(props: ViewProps) {
  const state = useApi<'lightning', WireTableOf<'LightningHooksTable'>>('lightning', { run: props.run, worker: props.worker, span: props.span });
  return (
    <div class="stack" data-testid="lightning">
      <Loaded state={state}>{(table) => <Lightning table={table} name={`${props.run}_${props.worker}_${props.span}`} />}</Loaded>
    </div>
  );
}

function Lightning({ table, name }: { table: WireTableOf<'LightningHooksTable'>; name: string }) {
  const rows = useMemo(() => typedRows(table), [table]);
  // rows arrive most time first
  const top = rows.slice(0, CHART_HOOKS);
  const chart = useMemo(
    () => stackedBarOption(top.map((r) => String(r.range)), [{ name: 'Total time', color: '#5470c6', values: top.map((r) => r.total_us) }], formatDuration, { horizontal: true, ticks: durationTicks, labelWidth: 260 }),
    [table],
  );
  const us = <K extends 'total_us' | 'mean_us' | 'max_us'>(key: K, label: string) => ({ key, label, numeric: true, format: (v: number | null) => formatDuration(v) });
  return (
    <>
      <Card title={`Time per hook (top ${CHART_HOOKS})`}>
        {rows.length ? <Chart option={chart} height={360} label="Time per Lightning hook" /> : <Empty>No Lightning hooks in this trace.</Empty>}
        <p class="hint">Hooks nest (run_training_batch holds training_step, backward and optimizer_step), so their times overlap.</p>
      </Card>
      <Card title="Lightning hooks">
        <DataTable
          id="lightning-hooks"
          schema="LightningHooksTable"
          rows={rows}
          csvColumns={table.columns}
          csvName={`${name}_lightning_hooks.csv`}
          searches={[{ label: 'Search hooks', keys: ['range'] }]}
          defaultSort={{ key: 'total_us', dir: 'desc' }}
          rowKey={(r) => String(r.range)}
          columns={[
            { key: 'hook', label: 'Hook' },
            { key: 'component', label: 'Component', format: (v) => (v ? String(v) : '—') },
            { key: 'owner', label: 'Class', format: (v) => (v ? String(v) : '—') },
            { key: 'calls', label: 'Calls', numeric: true, format: (v) => formatNumber(v) },
            us('total_us', 'Total'),
            us('mean_us', 'Mean'),
            us('max_us', 'Max'),
            { key: 'trace_pct', label: 'Share of trace', numeric: true, format: (v) => formatPct(v) },
          ]}
        />
      </Card>
    </>
  );
}
