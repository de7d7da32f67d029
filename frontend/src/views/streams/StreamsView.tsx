// Streams view (scratch): kernels per device and stream.

import { useMemo } from 'preact/hooks';
import type { ViewProps } from '../../api/types';
import { typedRows, type WireTableOf } from '../../api/tables';
import { useApi } from '../../api/useApi';
import type { QueryOf } from '../../api/tables';
import { formatDuration, formatNumber } from '../../base/format';
import { Card, Loaded } from '../../components/Status';
import { DataTable } from '../../components/table/DataTable';

export function StreamsView(props: ViewProps) {
  const query = { run: props.run, worker: props.worker, span: props.span } satisfies QueryOf<'streams'>;
  const state = useApi<WireTableOf<'StreamSummaryTable'>>('streams', query);
  return (
    <div class="stack" data-testid="streams">
      <Loaded state={state}>{(table) => <Streams table={table} />}</Loaded>
    </div>
  );
}

function Streams({ table }: { table: WireTableOf<'StreamSummaryTable'> }) {
  const rows = useMemo(() => typedRows(table), [table]);
  return (
    <Card title="Streams">
      <DataTable
        id="streams"
        schema="StreamSummaryTable"
        rows={rows}
        csvColumns={table.columns}
        csvName="streams.csv"
        searches={[]}
        defaultSort={{ key: 'total_us', dir: 'desc' }}
        rowKey={(r) => `${r.device}|${r.stream}`}
        columns={[
          { key: 'device', label: 'Device', numeric: true, format: (v) => formatNumber(v) },
          { key: 'stream', label: 'Stream', numeric: true, format: (v) => formatNumber(v) },
          { key: 'kernels', label: 'Kernels', numeric: true, format: (v) => formatNumber(v) },
          { key: 'total_us', label: 'Total', numeric: true, format: (v) => formatDuration(v) },
        ]}
      />
    </Card>
  );
}
