// GPU user annotations panel of the GPU idle view: device time per gpu_user_annotation range,
// nested as on the timeline (/gpu_annotations, rows in tree order); each row opens the Trace
// view on its first range. Shown only when the trace has such ranges.

import { useMemo } from 'preact/hooks';
import type { ViewProps } from '../../api/types';
import { typedRows, type RowOf, type WireTableOf } from '../../api/tables';
import { useApi } from '../../api/useApi';
import { formatDuration, formatNumber } from '../../base/format';
import { Card } from '../../components/Status';
import { DataTable, type Column } from '../../components/table/DataTable';
import { showInTrace, streamColumn } from './link';

type AnnotationRow = RowOf<'GpuAnnotationBreakdownTable'>;

const us = (key: 'total_us' | 'mean_us' | 'min_us' | 'max_us', label: string): Column<AnnotationRow> => ({ key, label, numeric: true, format: (v) => formatDuration(v) });

export function Annotations(props: ViewProps) {
  const state = useApi<'gpu_annotations', WireTableOf<'GpuAnnotationBreakdownTable'>>('gpu_annotations', { run: props.run, worker: props.worker, span: props.span });
  const rows = useMemo(() => (state.status === 'ok' ? typedRows(state.data) : []), [state]);
  if (state.status !== 'ok' || !rows.length) return null;
  const columns: Column<AnnotationRow>[] = [
    { key: 'path', label: 'Annotation', format: (_v, r) => <span title={String(r.path)} style={{ paddingLeft: `${Number(r.depth) * 16}px` }}>{String(r.name)}</span> },
    streamColumn,
    { key: 'calls', label: 'Ranges', numeric: true, format: (v) => formatNumber(v) },
    us('total_us', 'Total'),
    us('mean_us', 'Mean'),
    us('min_us', 'Min'),
    us('max_us', 'Max'),
    {
      key: 'first_start_us',
      label: 'Trace',
      title: 'Opens the Trace view on its first range',
      format: (v, r) => (
        <button type="button" class="link-button" style={{ whiteSpace: 'nowrap' }} data-control="annotation-show-in-trace" onClick={() => showInTrace(r.first_start_us, r.first_end_us)}>
          {formatDuration(v)}
        </button>
      ),
    },
  ];
  return (
    <Card title="GPU user annotations">
      <DataTable
        id="gpu-annotations"
        schema="GpuAnnotationBreakdownTable"
        rows={rows}
        columns={columns}
        csvColumns={state.data.columns}
        csvName={`${props.run}_${props.worker}_${props.span}_gpu_annotations.csv`}
        searches={[{ label: 'Search annotations', keys: ['path'] }]}
        defaultSort={null}
        rowKey={(r) => String(r.path)}
      />
      <div class="hint">Device time of each gpu_user_annotation range (record_function on the GPU), nested; rows in tree order, children by total time.</div>
    </Card>
  );
}
