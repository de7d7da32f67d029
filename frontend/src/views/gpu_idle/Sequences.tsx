// Fusion candidates panel of the GPU idle view: the most time-consuming sequences of kernels
// that repeat back to back on a stream, the operators that launched them and their time per
// step (/kernel_sequences?length=..); each row opens the Trace view on its first occurrence.

import { useMemo } from 'preact/hooks';
import type { ViewProps } from '../../api/types';
import { typedRows, type RowOf, type WireTableOf } from '../../api/tables';
import { useApi } from '../../api/useApi';
import { formatDuration, formatNumber, formatPct } from '../../base/format';
import { kernelSequenceColumn } from '../../components/KernelName';
import { Card, Loaded } from '../../components/Status';
import { DataTable, type Column } from '../../components/table/DataTable';
import { useUrlParam } from '../../components/useUrlParam';
import { showInTrace } from './link';

const LENGTHS = ['2', '3', '4', '5', '6', '8'];

export function Sequences(props: ViewProps) {
  const [length, setLength] = useUrlParam('sequence_length', '3');
  const chosen = LENGTHS.includes(length) ? length : '3';
  const state = useApi<'kernel_sequences', WireTableOf<'KernelSequencesTable'>>('kernel_sequences', { run: props.run, worker: props.worker, span: props.span, length: chosen, top: 50 });
  const columns: Column<RowOf<'KernelSequencesTable'>>[] = [
    { key: 'operators', label: 'Launched by' },
    { key: 'occurrences', label: 'Times', numeric: true, format: (v) => formatNumber(v) },
    { key: 'device_us', label: 'Device time', numeric: true, format: (v) => formatDuration(v) },
    { key: 'device_per_step_us', label: 'Per step', numeric: true, format: (v) => formatDuration(v) },
    { key: 'share_pct', label: 'Share', numeric: true, format: (v) => formatPct(v) },
    {
      key: 'first_start_us',
      label: 'Trace',
      title: 'Opens the Trace view on its first occurrence',
      format: (v, r) => (
        <button type="button" class="link-button" style={{ whiteSpace: 'nowrap' }} data-control="sequence-show-in-trace" onClick={() => showInTrace(r.first_start_us, r.first_end_us)}>
          {formatDuration(v)}
        </button>
      ),
    },
  ];
  return (
    <Card title="Fusion candidates: repeated kernel sequences" panel="sequences">
      <div class="toolbar">
        <label>
          Kernels per sequence
          <select data-control="sequence_length" value={chosen} onChange={(e) => setLength((e.target as HTMLSelectElement).value)}>
            {LENGTHS.map((n) => (
              <option value={n}>{n}</option>
            ))}
          </select>
        </label>
      </div>
      <Loaded state={state}>{(table) => <SequenceTable table={table} columns={columns} length={chosen} name={`${props.run}_${props.worker}_${props.span}_kernel_sequences_${chosen}.csv`} />}</Loaded>
      <div class="hint">
        Sequences of kernels that run one after another on a stream more than once, most device time first: fusing them (torch.compile, a fused
        kernel) saves launches and memory traffic. The 50 most time-consuming are listed; the route gives more.
      </div>
    </Card>
  );
}

function SequenceTable({ table, columns, length, name }: { table: WireTableOf<'KernelSequencesTable'>; columns: Column<RowOf<'KernelSequencesTable'>>[]; length: string; name: string }) {
  const rows = useMemo(() => typedRows(table), [table]);
  return (
    <DataTable
      id="kernel-sequences"
      schema="KernelSequencesTable"
      key={length}
      rows={rows}
      columns={[kernelSequenceColumn('sequence', 'Kernels', rows), ...columns]}
      csvColumns={table.columns}
      csvName={name}
      searches={[{ label: 'Search kernels', keys: ['sequence'] }, { label: 'Search operators', keys: ['operators'] }]}
      defaultSort={{ key: 'device_us', dir: 'desc' }}
      rowKey={(r) => `${r.device}|${r.stream}|${r.sequence}`}
    />
  );
}
