// Launch queues panel of the GPU idle view: per stream, how many launched activities waited
// to start over time (/queue_length, HTA's queue length), memcpy/memset bandwidth over time
// (/memory_bandwidth) and the per-stream summary (/queue_length_summary). A queue that sits at
// zero means the GPU ran each launch as soon as the CPU made it: the CPU was the bottleneck.
// Brushing a time range on a chart opens the Trace view on it.

import { useCallback, useMemo } from 'preact/hooks';
import type { ViewProps } from '../../api/types';
import { typedRows, type RowOf, type WireTableOf } from '../../api/tables';
import { useApi } from '../../api/useApi';
import { axisText, formatBandwidth, formatBytes, formatDuration, formatNumber } from '../../base/format';
import { Chart } from '../../components/charts/Chart';
import { esc, type echarts } from '../../components/charts/echarts';
import { Card, Empty, Loaded } from '../../components/Status';
import { DataTable, type Column } from '../../components/table/DataTable';
import { showInTrace, streamColumn } from './link';

type ECharts = ReturnType<typeof echarts.init>;

/** One step line per device stream of a change series (columns device, stream, ts_us, value). */
function stepOption<R extends { device: number; stream: number; ts_us: number }>(rows: R[], value: (row: R) => number, format: (v: number) => string) {
  const byStream = new Map<string, [number, number][]>();
  for (const r of rows) {
    const name = `GPU ${r.device} stream ${r.stream}`;
    if (!byStream.has(name)) byStream.set(name, []);
    byStream.get(name)!.push([r.ts_us, value(r)]);
  }
  return {
    tooltip: {
      trigger: 'axis',
      confine: true,
      formatter: (params: { seriesName: string; value: number[]; marker: string }[]) =>
        [`<b>${esc(formatDuration(params[0]?.value[0] ?? 0))}</b>`, ...params.map((p) => `${p.marker}${esc(p.seriesName)}: <b>${esc(format(p.value[1]))}</b>`)].join('<br/>'),
    },
    legend: { type: 'scroll', top: 0 },
    grid: { left: 72, right: 32, top: 36, bottom: 40 },
    brush: { xAxisIndex: 0, brushType: 'lineX', brushMode: 'single', transformable: false, throttleType: 'debounce' },
    xAxis: { type: 'value', min: 'dataMin', max: 'dataMax', name: 'Time', nameLocation: 'middle', nameGap: 26, axisLabel: { hideOverlap: true, formatter: (v: number) => axisText(formatDuration(v)) } },
    yAxis: { type: 'value', min: 0, axisLabel: { formatter: (v: number) => axisText(format(v)) } },
    series: [...byStream.entries()].map(([name, data]) => ({ name, type: 'line', step: 'end', showSymbol: false, sampling: 'lttb', data })),
  };
}

/** A brushed time range on a chart opens the Trace view on it. */
function useBrushToTrace() {
  return useCallback((chart: ECharts) => {
    chart.dispatchAction({ type: 'takeGlobalCursor', key: 'brush', brushOption: { brushType: 'lineX', brushMode: 'single' } });
    const handler = (event: unknown) => {
      const range = (event as { areas?: { coordRange?: number[] }[] }).areas?.[0]?.coordRange;
      if (range && range.length === 2 && range[1] > range[0]) showInTrace(range[0], range[1]);
    };
    chart.on('brushEnd', handler);
    return () => chart.off('brushEnd', handler);
  }, []);
}


export function Queues(props: ViewProps) {
  const base = { run: props.run, worker: props.worker, span: props.span };
  const summary = useApi<'queue_length_summary', WireTableOf<'QueueLengthSummaryTable'>>('queue_length_summary', base);
  const queue = useApi<'queue_length', WireTableOf<'QueueLengthTable'>>('queue_length', base);
  const bandwidth = useApi<'memory_bandwidth', WireTableOf<'MemoryBandwidthTable'>>('memory_bandwidth', base);
  const onChart = useBrushToTrace();
  const queueOption = useMemo(() => (queue.status === 'ok' ? stepOption(typedRows(queue.data), (r) => r.queue_length, formatNumber) : null), [queue]);
  const bandwidthRows = useMemo(() => (bandwidth.status === 'ok' ? typedRows(bandwidth.data) : []), [bandwidth]);
  const bandwidthOption = useMemo(() => stepOption(bandwidthRows, (r) => r.memory_bw_gbps, formatBandwidth), [bandwidthRows]);
  const columns: Column<RowOf<'QueueLengthSummaryTable'>>[] = [
    streamColumn,
    { key: 'launches', label: 'Launches', numeric: true, format: (v) => formatNumber(v) },
    { key: 'max_queue_length', label: 'Max queue', numeric: true, format: (v) => formatNumber(v) },
    { key: 'mean_queue_length', label: 'Mean queue', numeric: true, format: (v) => formatNumber(v) },
    { key: 'time_at_zero_us', label: 'Queue empty', numeric: true, format: (v) => formatDuration(v) },
    { key: 'max_outstanding', label: 'Max in flight', numeric: true, format: (v) => formatNumber(v) },
    { key: 'memory_bytes', label: 'Copied', numeric: true, format: (v) => formatBytes(v) },
    { key: 'peak_memory_bw_gbps', label: 'Peak copy BW', numeric: true, format: (v) => formatBandwidth(v) },
    {
      key: 'start_us',
      label: 'Trace',
      title: 'Opens the Trace view from the first launch call to the end of the last launched activity',
      format: (v, r) => (
        <button type="button" class="link-button" style={{ whiteSpace: 'nowrap' }} data-control="queue-show-in-trace" onClick={() => showInTrace(r.start_us, r.end_us)}>
          {formatDuration(v)}
        </button>
      ),
    },
  ];
  return (
    <>
      <Card title="Launch queue per stream">
        <Loaded state={queue}>
          {(table) =>
            table.rows.length && queueOption ? <Chart option={queueOption} height={280} onChart={onChart} label="Queue length over time" testId="queue-length-chart" /> : <Empty>No launches in this trace.</Empty>
          }
        </Loaded>
        <div class="hint">
          Launched activities waiting to start on each stream (Holistic Trace Analysis’s queue length). A queue near zero while the GPU idles means the CPU
          launches too slowly. Brush a range to open it in the Trace view.
        </div>
      </Card>
      {bandwidthRows.length ? (
        <Card title="Memcpy / memset bandwidth per stream">
          <Chart option={bandwidthOption} height={240} onChart={onChart} label="Copy bandwidth over time" testId="memory-bandwidth-chart" />
        </Card>
      ) : null}
      <Card title="Queues per stream">
        <Loaded state={summary}>
          {(table) => <QueueTable table={table} columns={columns} name={`${props.run}_${props.worker}_${props.span}_queue_length_summary.csv`} />}
        </Loaded>
      </Card>
    </>
  );
}

function QueueTable({ table, columns, name }: { table: WireTableOf<'QueueLengthSummaryTable'>; columns: Column<RowOf<'QueueLengthSummaryTable'>>[]; name: string }) {
  const rows = useMemo(() => typedRows(table), [table]);
  return (
    <DataTable
      id="queue-length-summary"
      schema="QueueLengthSummaryTable"
      rows={rows}
      columns={columns}
      csvColumns={table.columns}
      csvName={name}
      defaultSort={{ key: 'max_queue_length', dir: 'desc' }}
      rowKey={(r) => `${r.device}|${r.stream}`}
    />
  );
}
