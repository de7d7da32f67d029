// Memory view: device selector; allocated/reserved curve with the peak marked. Drag across
// the curve to select a time range: the curve, the allocation events and the per-operator
// statistics are then fetched for that range only. Reset goes back to the whole trace; the
// size filters narrow the events table. Device and range are kept in the page URL.

import { useCallback, useMemo, useState } from 'preact/hooks';
import { typedRows, type WireTableOf } from '../../api/tables';
import type { MemoryCurveReply, MemoryDevicesReply, ViewProps } from '../../api/types';
import { useApi } from '../../api/useApi';
import { axisText, byteTickInterval, formatBytes, formatDuration, formatNumber, roundAxis, timeTickInterval } from '../../base/format';
import { Chart } from '../../components/charts/Chart';
import { esc, type echarts } from '../../components/charts/echarts';
import { Card, Empty, Loaded } from '../../components/Status';
import { DataTable } from '../../components/table/DataTable';
import { useUrlParam } from '../../components/useUrlParam';

type ECharts = ReturnType<typeof echarts.init>;

export function MemoryView(props: ViewProps) {
  const base = { run: props.run, worker: props.worker, span: props.span };
  const devices = useApi<'memory_devices', MemoryDevicesReply>('memory_devices', base);
  return (
    <div class="stack" data-testid="memory">
      <Loaded state={devices}>
        {(data) => (data.devices.length ? <Memory {...props} devices={data.devices} /> : <Empty>No memory records in this trace (profile with profile_memory=True).</Empty>)}
      </Loaded>
    </div>
  );
}

function Memory(props: ViewProps & { devices: string[] }) {
  const [deviceParam, setDevice] = useUrlParam('device', '');
  // A GPU run opens on its first GPU: that is the memory a user runs out of (the API lists CPU first).
  const device = props.devices.includes(deviceParam) ? deviceParam : (props.devices.find((d) => d !== 'CPU') ?? props.devices[0]);
  const [startParam, setStart] = useUrlParam('start_us', '');
  const [endParam, setEnd] = useUrlParam('end_us', '');
  const start = startParam === '' ? null : Number(startParam);
  const end = endParam === '' ? null : Number(endParam);
  const hasRange = start !== null && end !== null && Number.isFinite(start) && Number.isFinite(end) && end >= start;
  const query = { run: props.run, worker: props.worker, span: props.span, device, start_us: hasRange ? start : null, end_us: hasRange ? end : null };
  const curve = useApi<'memory_curve', MemoryCurveReply>('memory_curve', { ...query, max_points: 2000 });
  const events = useApi<'memory_events', WireTableOf<'MemoryEventsTable'>>('memory_events', query);
  const stats = useApi<'memory_stats', WireTableOf<'MemoryStatsTable'>>('memory_stats', query);
  const [minKb, setMinKb] = useState('');
  const [maxKb, setMaxKb] = useState('');

  const selectRange = useCallback((from: number, to: number) => {
    setStart(String(Math.round(Math.min(from, to) * 1000) / 1000));
    setEnd(String(Math.round(Math.max(from, to) * 1000) / 1000));
  }, []);
  const reset = () => {
    setStart(null);
    setEnd(null);
  };
  const name = `${props.run}_${props.worker}_${props.span}_${device}`;

  return (
    <>
      <div class="toolbar">
        <label>
          Device
          <select data-control="device" value={device} onChange={(e) => { setDevice((e.target as HTMLSelectElement).value); reset(); }}>
            {props.devices.map((d) => (
              <option key={d} value={d}>{d}</option>
            ))}
          </select>
        </label>
        <span class="range-label" data-testid="memory-range" data-start-us={hasRange ? String(start) : ''} data-end-us={hasRange ? String(end) : ''}>
          {hasRange ? `Range: ${formatDuration(start)} – ${formatDuration(end)}` : 'Whole trace (drag across the curve to select a range)'}
        </span>
        <button type="button" data-control="reset-range" onClick={reset} disabled={!hasRange}>
          Reset range
        </button>
      </div>
      <Card title={`Memory usage on ${device}`}>
        <Loaded state={curve}>{(data) => <Curve data={data} onRange={selectRange} />}</Loaded>
      </Card>
      <Card title="Allocation events">
        <div class="toolbar">
          <label>
            Min size (KiB)
            <input type="number" min="0" data-control="min-size" value={minKb} onInput={(e) => setMinKb((e.target as HTMLInputElement).value)} style={{ width: '90px' }} />
          </label>
          <label>
            Max size (KiB)
            <input type="number" min="0" data-control="max-size" value={maxKb} onInput={(e) => setMaxKb((e.target as HTMLInputElement).value)} style={{ width: '90px' }} />
          </label>
        </div>
        <Loaded state={events}>
          {(table) => <Events table={table} minKb={minKb} maxKb={maxKb} name={name} />}
        </Loaded>
      </Card>
      <Card title="Memory statistics per operator">
        <Loaded state={stats}>
          {(table) => (
            <DataTable
              id="memory-stats"
              schema="MemoryStatsTable"
              rows={typedRows(table)}
              csvColumns={table.columns}
              csvName={`${name}_memory_stats.csv`}
              searches={[{ label: 'Search operators', keys: ['operator'] }]}
              defaultSort={{ key: 'size_increase_bytes', dir: 'desc' }}
              rowKey={(r) => r.operator}
              columns={[
                { key: 'operator', label: 'Operator', format: (v) => (v === '' ? '(no operator)' : String(v)) },
                { key: 'calls', label: 'Calls', numeric: true, format: (v) => formatNumber(v) },
                { key: 'size_increase_bytes', label: 'Size increase', numeric: true, format: (v) => formatBytes(v) },
                { key: 'self_size_increase_bytes', label: 'Self size increase', numeric: true, format: (v) => formatBytes(v) },
                { key: 'alloc_count', label: 'Allocations', numeric: true, format: (v) => formatNumber(v) },
                { key: 'self_alloc_count', label: 'Self allocations', numeric: true, format: (v) => formatNumber(v) },
                { key: 'alloc_bytes', label: 'Allocated', numeric: true, format: (v) => formatBytes(v) },
                { key: 'self_alloc_bytes', label: 'Self allocated', numeric: true, format: (v) => formatBytes(v) },
              ]}
            />
          )}
        </Loaded>
      </Card>
    </>
  );
}

function Events({ table, minKb, maxKb, name }: { table: WireTableOf<'MemoryEventsTable'>; minKb: string; maxKb: string; name: string }) {
  const all = useMemo(() => typedRows(table), [table]);
  const min = minKb === '' ? null : Number(minKb) * 1024;
  const max = maxKb === '' ? null : Number(maxKb) * 1024;
  const rows = useMemo(
    () => all.filter((r) => (min === null || r.size_bytes >= min) && (max === null || r.size_bytes <= max)),
    [all, min, max],
  );
  const unpairable = useMemo(() => all.some((r) => r.free_known === false), [all]);
  return (
    <>
      {unpairable ? (
        <div class="hint" data-testid="memory-no-addresses">
          This trace's allocator records carry no addresses (PyTorch before 1.10), so frees cannot be matched to
          allocations: free times and lifetimes are unknown, and a selected range lists the allocations made in it (not those still alive in
          it). The curve and the statistics per operator are complete.
        </div>
      ) : null}
      <DataTable
        id="memory-events"
        schema="MemoryEventsTable"
        rows={rows}
        csvColumns={table.columns}
        csvName={`${name}_memory_events.csv`}
        searches={[{ label: 'Search operators', keys: ['operator'] }]}
        rowKey={(r) => `${r.alloc_us}|${r.operator}|${r.size_bytes}|${r.free_us}`}
        columns={[
          { key: 'operator', label: 'Operator', format: (v) => (v === '' ? '(no operator)' : String(v)) },
          { key: 'size_bytes', label: 'Size', numeric: true, format: (v) => formatBytes(v) },
          { key: 'alloc_us', label: 'Allocated at', numeric: true, format: (v) => formatDuration(v) },
          // Without addresses (PyTorch < 1.10) a free cannot be found: unknown, not "not freed".
          { key: 'free_us', label: 'Freed at', numeric: true, format: (v, r) => (v !== null ? formatDuration(v) : r.free_known === false ? 'unknown' : 'not freed') },
          { key: 'duration_us', label: 'Lifetime', numeric: true, format: (v) => formatDuration(v) },
        ]}
      />
    </>
  );
}

function Curve({ data, onRange }: { data: MemoryCurveReply; onRange: (from: number, to: number) => void }) {
  const rows = data.curve.rows as (number | null)[][];
  const hasReserved = rows.some((r) => r[2] !== null && r[2] !== 0);
  const option = useMemo(() => {
    const peak = data.peaks;
    // Ticks at round binary sizes (ECharts would space bytes decimally: 292.97 KiB, 585.94 KiB).
    let top = peak.peak_allocated_bytes ?? 0;
    for (const r of rows) top = Math.max(top, r[1] ?? 0, r[2] ?? 0);
    const interval = byteTickInterval(top);
    // Time ticks at round values from a round start (ECharts' 'dataMin' labelled the first
    // sample, "297.6 µs", and put "1.03 s" beside "1 s" at the end).
    let first = Infinity;
    let last = -Infinity;
    for (const r of rows) {
      first = Math.min(first, r[0] ?? Infinity);
      last = Math.max(last, r[0] ?? -Infinity);
    }
    const time = Number.isFinite(first) ? roundAxis(first, last, timeTickInterval(last - first)) : null;
    return {
      tooltip: {
        trigger: 'axis',
        confine: true,
        formatter: (params: { seriesName: string; value: (number | null)[]; marker: string }[]) => {
          const t = params[0]?.value[0] ?? 0;
          return [`<b>${esc(formatDuration(t))}</b>`, ...params.map((p) => `${p.marker}${esc(p.seriesName)}: <b>${esc(formatBytes(p.value[1] as number))}</b>`)].join('<br/>');
        },
      },
      legend: { top: 0 },
      grid: { left: 80, right: 32, top: 36, bottom: 40 },
      brush: { xAxisIndex: 0, brushType: 'lineX', brushMode: 'single', transformable: false, throttleType: 'debounce', brushStyle: { color: 'rgba(245,124,0,0.15)', borderColor: '#f57c00' } },
      xAxis: { type: 'value', ...(time ?? { min: 'dataMin', max: 'dataMax' }), name: 'Time', nameLocation: 'middle', nameGap: 26, axisLabel: { hideOverlap: true, formatter: (v: number) => axisText(formatDuration(v)) } },
      yAxis: { type: 'value', min: 0, max: Math.max(1, Math.ceil(top / interval)) * interval, interval, axisLabel: { formatter: (v: number) => axisText(formatBytes(v)) } },
      series: [
        {
          name: 'Allocated',
          type: 'line',
          step: 'end',
          showSymbol: false,
          data: rows.map((r) => [r[0], r[1]]),
          markPoint:
            peak.peak_allocated_us !== null && peak.peak_allocated_bytes !== null
              ? {
                  symbol: 'pin',
                  symbolSize: 40,
                  label: { formatter: () => 'peak', fontSize: 10 },
                  tooltip: { formatter: () => `Peak allocated: <b>${esc(formatBytes(peak.peak_allocated_bytes))}</b> at ${esc(formatDuration(peak.peak_allocated_us))}` },
                  data: [{ name: 'Peak', coord: [peak.peak_allocated_us, peak.peak_allocated_bytes] }],
                }
              : undefined,
        },
        ...(hasReserved ? [{ name: 'Reserved', type: 'line', step: 'end', showSymbol: false, data: rows.map((r) => [r[0], r[2]]) }] : []),
      ],
    };
  }, [data]);
  const onChart = useCallback(
    (chart: ECharts) => {
      chart.dispatchAction({ type: 'takeGlobalCursor', key: 'brush', brushOption: { brushType: 'lineX', brushMode: 'single' } });
      const handler = (event: unknown) => {
        const areas = (event as { areas?: { coordRange?: number[] }[] }).areas ?? [];
        const range = areas[0]?.coordRange;
        if (range && range.length === 2 && range[1] > range[0]) onRange(range[0], range[1]);
      };
      chart.on('brushEnd', handler);
      return () => chart.off('brushEnd', handler);
    },
    [onRange],
  );
  const peaks = data.peaks;
  return (
    <>
      <div class="cards">
        <div class="metric"><div class="label">Peak allocated</div><div class="value" data-field="peak_allocated">{formatBytes(peaks.peak_allocated_bytes)}</div></div>
        <div class="metric"><div class="label">Peak reserved</div><div class="value">{formatBytes(peaks.peak_reserved_bytes)}</div></div>
        <div class="metric"><div class="label">Device memory</div><div class="value">{formatBytes(peaks.total_memory_bytes)}</div></div>
      </div>
      {rows.length ? <Chart option={option} height={320} label="Memory curve" onChart={onChart} testId="memory-curve" /> : <Empty>No allocations in this range.</Empty>}
    </>
  );
}
