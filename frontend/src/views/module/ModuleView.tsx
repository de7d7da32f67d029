// Module view: the nn.Module hierarchy as a tree table with forward and backward times, and
// a flame graph of the module tree.

import { useMemo } from 'preact/hooks';
import { typedRows, type RowOf, type WireTableOf } from '../../api/tables';
import type { FlameNode, ViewProps } from '../../api/types';
import { useApi } from '../../api/useApi';
import { formatDuration, formatNumber } from '../../base/format';
import { Card, Empty, Loaded } from '../../components/Status';
import { DataTable, type Column } from '../../components/table/DataTable';
import { anyNonZero } from '../../components/table/logic';
import { Flame } from './Flame';

type ModulesTable = WireTableOf<'ModulesTable'>;
type ModuleRow = RowOf<'ModulesTable'>;
/** The time columns of the module table (µs). */
type TimeColumn = { [K in keyof ModuleRow]: K extends `${string}_us` ? K : never }[keyof ModuleRow];

export function ModuleView(props: ViewProps) {
  const base = { run: props.run, worker: props.worker, span: props.span };
  const modules = useApi<'modules', ModulesTable>('modules', base);
  const flame = useApi<'module_flame', FlameNode>('module_flame', base);
  const name = `${props.run}_${props.worker}_${props.span}`;
  return (
    <div class="stack" data-testid="module">
      <Card title="Module hierarchy">
        <Loaded state={modules}>{(table) => <Modules table={table} name={name} />}</Loaded>
      </Card>
      <Card title="Module flame graph (host total time)">
        <Loaded state={flame}>{(tree) => (tree.children.length ? <Flame tree={tree} /> : <Empty>No nn.Module records (profile with with_modules=True).</Empty>)}</Loaded>
      </Card>
    </div>
  );
}

function Modules({ table, name }: { table: ModulesTable; name: string }) {
  const rows = useMemo(() => typedRows(table), [table]);
  const us = (key: TimeColumn, text: string): Column<ModuleRow> => ({ key, label: text, numeric: true, format: (v) => formatDuration(v) });
  if (!rows.length) return <Empty>No nn.Module records (profile with with_modules=True).</Empty>;
  const device: TimeColumn[] = ['device_total_us', 'device_self_us', 'backward_device_total_us'];
  const withDevice = anyNonZero(rows, device);
  // activation checkpointing: the forward run again inside the backward, on the block's own row
  const withRecompute = anyNonZero(rows, ['recompute_us']);
  return (
    <>
      {withRecompute ? (
        <p class="hint" data-testid="recompute-note">
          Occurrences and host times count forward calls only; a checkpointed block&apos;s forward run again in the backward is in the Recompute columns, not in Backward.
        </p>
      ) : null}
      <DataTable
        id="modules"
        schema="ModulesTable"
        rows={rows}
        csvColumns={table.columns}
        csvName={`${name}_modules.csv`}
        tree={{ id: 'node_id', parent: 'parent_id' }}
        searches={[{ label: 'Search modules', keys: ['name', 'module_type'] }]}
        rowKey={(r) => String(r.node_id)}
        columns={[
          { key: 'name', label: 'Module' },
          { key: 'module_type', label: 'Type' },
          { key: 'occurrences', label: 'Occurrences', numeric: true, format: (v) => formatNumber(v) },
          { key: 'operators', label: 'Operators', numeric: true, format: (v) => formatNumber(v) },
          us('host_total_us', 'Host total'),
          us('host_self_us', 'Host self'),
          ...(withDevice ? [us('device_total_us', 'Device total'), us('device_self_us', 'Device self')] : []),
          us('backward_host_total_us', 'Backward host total'),
          ...(withDevice ? [us('backward_device_total_us', 'Backward device total')] : []),
          ...(withRecompute
            ? [
                { key: 'recompute_occurrences', label: 'Recomputed (checkpoint)', numeric: true, format: (v: number) => formatNumber(v) } as Column<ModuleRow>,
                us('recompute_us', 'Recompute host'),
                ...(withDevice ? [us('recompute_device_us', 'Recompute device')] : []),
              ]
            : []),
        ]}
      />
    </>
  );
}
