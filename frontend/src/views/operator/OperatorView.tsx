// Operator view: four top-N pies (device self/total, host self/total), grouping by name or
// name + input shape, a searchable sortable table with expandable call stacks.

import { useMemo } from 'preact/hooks';
import type { TensorCoreShare, ViewProps } from '../../api/types';
import { typedRows, type RowOf, type WireTableOf } from '../../api/tables';
import { useApi } from '../../api/useApi';
import { formatDuration, formatFlops, formatNumber, formatPct, formatTflops } from '../../base/format';
import { Chart } from '../../components/charts/Chart';
import { rooflineOption, topSlices } from '../../components/charts/options';
import { Pie } from '../../components/charts/Pie';
import { Card, Empty, Loaded } from '../../components/Status';
import { DataTable, type Column } from '../../components/table/DataTable';
import { anyNonZero } from '../../components/table/logic';
import { useUrlParam } from '../../components/useUrlParam';
import { Stacks } from './Stacks';
import { TopNSelect, useTopN } from '../../components/TopNSelect';

type ByName = WireTableOf<'OperatorsByNameTable'>;
type ByNameShape = WireTableOf<'OperatorsByNameShapeTable'>;
/** A row of either grouping: by name + input shape adds `input_shape`. */
type OperatorRow = RowOf<'OperatorsByNameTable'> & Partial<RowOf<'OperatorsByNameShapeTable'>>;
type TimeColumn = 'device_self_us' | 'device_total_us' | 'host_self_us' | 'host_self_less_python_us' | 'host_total_us';

function isByNameShape(table: ByName | ByNameShape): table is ByNameShape {
  return table.columns[1] === 'input_shape';
}

const PIES: [TimeColumn, string][] = [
  ['device_self_us', 'Device self time'],
  ['device_total_us', 'Device total time'],
  ['host_self_us', 'Host self time'],
  ['host_total_us', 'Host total time'],
];

export function OperatorView(props: ViewProps) {
  const [groupBy, setGroupBy] = useUrlParam('group_by', 'name');
  // Other views link here with an operator to search for (the trace view's event details).
  const [search] = useUrlParam('op_search', '');
  const [topN, setTopN] = useTopN();
  // torch.compile: the table can be cut to the ops inside compiled regions or outside them,
  // offered only when the trace has compiled regions
  const [scopeParam, setScope] = useUrlParam('scope', 'all');
  const share = useApi<'compiled', WireTableOf<'CompiledShareTable'>>('compiled', { run: props.run, worker: props.worker, span: props.span, table: 'share' });
  const hasCompiled = share.status === 'ok' && Number(typedRows(share.data)[0]?.regions) > 0;
  const scope = hasCompiled && ['compiled', 'eager'].includes(scopeParam) ? scopeParam : 'all';
  const state = useApi<'operators', ByName | ByNameShape>('operators', { run: props.run, worker: props.worker, span: props.span, group_by: groupBy, scope });
  return (
    <div class="stack" data-testid="operator">
      <div class="toolbar">
        <label>
          Group by
          <select data-control="group_by" value={groupBy} onChange={(e) => setGroupBy((e.target as HTMLSelectElement).value)}>
            <option value="name">Operator</option>
            <option value="name_shape">Operator + input shape</option>
          </select>
        </label>
        {hasCompiled ? (
          <label>
            Ran
            <select data-control="scope" value={scope} onChange={(e) => setScope((e.target as HTMLSelectElement).value)}>
              <option value="all">Compiled and eager</option>
              <option value="compiled">Inside torch.compile regions</option>
              <option value="eager">Eager (outside compiled regions)</option>
            </select>
          </label>
        ) : null}
        <TopNSelect value={topN} onChange={setTopN} />
      </div>
      <Loaded state={state}>{(table) => <Operators {...props} table={table} groupBy={groupBy} topN={topN} search={search} />}</Loaded>
      <Flops {...props} />
    </div>
  );
}

function Operators({ table, groupBy, topN, run, worker, span, search }: ViewProps & { table: ByName | ByNameShape; groupBy: string; topN: number; search: string }) {
  const rows = useMemo((): OperatorRow[] => (isByNameShape(table) ? typedRows(table) : typedRows(table)), [table]);
  const byShape = groupBy === 'name_shape';
  const label = (r: OperatorRow) => (byShape ? `${r.name} ${r.input_shape ?? ''}` : String(r.name));
  const pies = useMemo(
    () =>
      PIES.map(([key, title]) => {
        const slices = topSlices(rows.map((r) => ({ name: label(r), value: Number(r[key]) || 0 })), topN);
        return { key, title, slices };
      }),
    [rows, topN],
  );
  const noDevice = !anyNonZero(rows, ['device_self_us', 'device_total_us']);
  // with_stack recorded Python frames inside some operator: torch's two self times differ
  const pythonInside = rows.some((r) => r.host_self_less_python_us !== r.host_self_us);
  const us = (key: TimeColumn, text: string): Column<OperatorRow> => ({ key, label: text, numeric: true, format: (v) => formatDuration(v) });
  // the vendor's name for the units: Tensor Cores (NVIDIA) or Matrix cores (AMD)
  const share = useApi<'kernel_tensor_cores', TensorCoreShare>('kernel_tensor_cores', { run, worker, span });
  const unit = share.status === 'ok' ? share.data.unit : 'Tensor Cores';
  const tensorCores: Column<OperatorRow>[] = [
    { key: 'tc_eligible', label: `${unit}: eligible`, format: (v) => (v ? 'Yes' : 'No') },
    { key: 'tc_self_pct', label: `${unit}: self`, numeric: true, format: (v) => formatPct(v) },
    { key: 'tc_total_pct', label: `${unit}: total`, numeric: true, format: (v) => formatPct(v) },
  ];
  const shapeColumn: Column<OperatorRow>[] = byShape ? [{ key: 'input_shape', label: 'Input shape', wide: true }] : [];
  const pythonColumn: Column<OperatorRow>[] = pythonInside
    ? [{ ...us('host_self_less_python_us', 'Host self less Python'), title: "torch 2.13's key_averages() self CPU time: host self less the Python frames (with_stack) that ran inside the operator" }]
    : [];
  const columns: Column<OperatorRow>[] = [
    { key: 'name', label: 'Name' },
    ...shapeColumn,
    { key: 'calls', label: 'Calls', numeric: true, format: (v) => formatNumber(v) },
    // Without device time the device and Tensor Core columns would be zeros and dashes
    // (the CSV keeps them).
    ...(noDevice ? [] : [us('device_self_us', 'Device self'), us('device_total_us', 'Device total')]),
    us('host_self_us', 'Host self'),
    ...pythonColumn,
    us('host_total_us', 'Host total'),
    ...(noDevice ? [] : tensorCores),
  ];
  return (
    <>
      {noDevice ? <div class="hint">No device time in this trace: host times only.</div> : null}
      {pythonInside ? (
        <div class="hint" data-testid="python-self-time">
          Python frames ran inside some operators: “Host self” is torch 2.11’s key_averages() self time (and torch-tb-profiler 0.4.3’s),
          “Host self less Python” torch 2.13’s, which also subtracts those frames.
        </div>
      ) : null}
      <div class={noDevice ? 'grid pair' : 'grid four'} data-testid="operator-pies">
        {pies.filter((pie) => !(noDevice && pie.key.startsWith('device'))).map((pie) => (
          <Card key={pie.key}>
            {pie.slices.length ? <Pie title={pie.title} slices={pie.slices} format={formatDuration} label={pie.title} /> : <Empty>{pie.title}: none recorded.</Empty>}
          </Card>
        ))}
      </div>
      <Card title="Operators">
        <DataTable
          id="operators"
          schema={byShape ? 'OperatorsByNameShapeTable' : 'OperatorsByNameTable'}
          key={groupBy}
          rows={rows}
          columns={columns}
          csvColumns={table.columns}
          csvName={`${run}_${worker}_${span}_operators_${groupBy}.csv`}
          searches={[{ label: 'Search operators', keys: byShape ? ['name', 'input_shape'] : ['name'] }]}
          initialQueries={[search]}
          defaultSort={{ key: noDevice ? 'host_self_us' : 'device_self_us', dir: 'desc' }}
          rowKey={(r) => `${r.name}|${r.input_shape ?? ''}`}
          details={{
            label: 'Call stacks',
            has: (r) => Boolean(r.has_call_stack),
            render: (r) => <Stacks run={run} worker={worker} span={span} name={String(r.name)} inputShape={byShape ? (r.input_shape ?? null) : null} />,
          }}
        />
      </Card>
    </>
  );
}

/** FLOPs per operator (from the profiler's flops arg or from shapes) with their rates and the
 * share of the GPU's peak; without any, the server's reason, which fits the run (what it
 * lacks: shapes, or operators at all where the matrix work ran in CUDA-graph replays). */
function Flops({ run, worker, span }: ViewProps) {
  const state = useApi<'flops', { operators: WireTableOf<'FlopsOperatorsTable'>; missing: WireTableOf<'FlopsMissingTable'> }>(
    'flops', { run, worker, span, tables: 'operators,missing' });
  return (
    <Card title="FLOPs">
      <Loaded state={state}>
        {({ operators: table, missing }) => {
          const rows = typedRows(table);
          if (!rows.length) {
            return (
              <p class="hint" data-testid="no-flops">
                No operator with a FLOP count: {typedRows(missing).map((r) => r.reason).join('; ')}.
              </p>
            );
          }
          const rate = (key: 'host_tflops_per_s' | 'device_tflops_per_s' | 'peak_tflops_per_s', label: string): Column<RowOf<'FlopsOperatorsTable'>> => ({ key, label, numeric: true, format: (v) => formatTflops(v) });
          const onDevice = rows.filter((r) => Number(r.device_tflops_per_s) > 0 && Number(r.flop_per_byte) > 0);
          const top = rows[0]; // most FLOPs first: its dtype's peak is the roof
          const roofline = rooflineOption(
            onDevice.map((r) => ({ name: String(r.name), intensity: Number(r.flop_per_byte), tflops: Number(r.device_tflops_per_s) })),
            top.peak_tflops_per_s === null ? null : Number(top.peak_tflops_per_s),
            top.peak_bandwidth_gbps === null ? null : Number(top.peak_bandwidth_gbps),
            formatTflops,
          );
          return (
            <>
            {onDevice.length ? (
              <Chart option={roofline} height={320} label="Roofline" />
            ) : (
              <p class="hint" data-testid="no-roofline">
                No roofline: it needs device time per operator (a GPU trace) and shapes with dtypes (<code>record_shapes=True</code>).
              </p>
            )}
            {onDevice.length && (top.peak_tflops_per_s === null || top.peak_bandwidth_gbps === null) ? (
              <p class="hint">Peak unknown for this GPU: the roof is not drawn.</p>
            ) : null}
            <DataTable
              id="flops"
              schema="FlopsOperatorsTable"
              rows={rows}
              csvColumns={table.columns}
              csvName={`${run}_${worker}_${span}_flops.csv`}
              searches={[{ label: 'Search operators', keys: ['name'] }]}
              defaultSort={{ key: 'flops', dir: 'desc' }}
              rowKey={(r) => String(r.name)}
              caption="An op's FLOPs count once, at the innermost counted op; rows include their sub-operators'. % of peak compares the device rate with the GPU's dense peak for the dtype (— : peak unknown). Causal attention counts half of the full product (TraceLens's convention; torch's FlopCounterMode counts it whole)."
              columns={[
                { key: 'name', label: 'Operator' },
                { key: 'calls', label: 'Calls', numeric: true, format: (v) => formatNumber(v) },
                { key: 'flops', label: 'FLOPs', numeric: true, format: (v) => formatFlops(v) },
                { key: 'source', label: 'From' },
                { key: 'dtype', label: 'Dtype', format: (v) => (v ? String(v) : '—') },
                rate('host_tflops_per_s', 'Host rate'),
                rate('device_tflops_per_s', 'Device rate'),
                rate('peak_tflops_per_s', 'Peak'),
                { key: 'pct_of_peak', label: '% of peak', numeric: true, format: (v) => formatPct(v) },
                { key: 'flop_per_byte', label: 'FLOP / byte', numeric: true, format: (v) => formatNumber(v) },
              ]}
            />
            </>
          );
        }}
      </Loaded>
    </Card>
  );
}
