// Memory snapshot view: the CUDA memory snapshots of a run (torch.cuda.memory._dump_snapshot),
// every rank's side by side with its peak and OOM; for the chosen one and device, the moment
// memory ran out as a card, the Active Memory Timeline as the server draws it at the zoom
// shown (the largest allocations as bands, the rest merged, reserved memory as a line), and
// what holds the memory at the chosen moment: by the user's own frame, by category, as a
// flame graph and as the allocator's segments. Drag across the timeline to zoom, click it to
// choose the moment. Snapshot, device, window and moment are kept in the page URL.

import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { typedRows, type RowOf, type WireTableOf } from '../../api/tables';
import type { MemoryCurveReply, ViewProps } from '../../api/types';
import { useApi } from '../../api/useApi';
import { formatBytes, formatDuration, formatPct } from '../../base/format';
import { RankCoverage } from '../../components/RankCoverage';
import { Card, Empty, Loaded } from '../../components/Status';
import { DataTable } from '../../components/table/DataTable';
import { useUrlParam } from '../../components/useUrlParam';

type Timeline = {
  bands: WireTableOf<'SnapshotTimelineBandsTable'>;
  points: WireTableOf<'SnapshotTimelinePointsTable'>;
  totals: WireTableOf<'SnapshotTimelineTotalsTable'>;
};
type Band = RowOf<'SnapshotTimelineBandsTable'>;
/** The run's snapshots side by side, how many that covers and those that could not be read. */
type Ranks = {
  ranks: WireTableOf<'SnapshotRanksTable'>;
  coverage: WireTableOf<'RankCoverageTable'>;
  missing: WireTableOf<'MissingSnapshotsTable'>;
};

const WIDTH = 1000;
const HEIGHT = 280;
const LEFT = 70;

export function SnapshotView(props: ViewProps) {
  const listed = props.runs.find((r) => r.name === props.run)?.snapshots ?? [];
  const names = [...new Set(listed.map((s) => s.name))];
  const [snapshotParam, setSnapshot] = useUrlParam('snapshot', '');
  const ranks = useApi<'snapshot_ranks', Ranks>(names.length ? 'snapshot_ranks' : null, { run: props.run });
  // A snapshot that cannot be read is left out of the comparison, which names it with its
  // reason (as the Job view names a rank that did not load); when none can be read, the
  // comparison's error names the first, by the name the run lists it under (the reply's path
  // is the file's place under the log directory, as the run lists it). Either way the chosen
  // snapshot's own routes are not asked: it is named once (and none is, when none reads). The
  // one shown first is the first that reads, once the comparison (which reads them all) says
  // which do.
  const missing = ranks.status === 'ok' ? typedRows(ranks.data.missing).map((r) => r.snapshot) : [];
  const failed = ranks.status === 'error' ? listed.find((s) => s.path === ranks.path)?.name ?? null : null;
  const readable = names.filter((n) => !missing.includes(n));
  const snapshot = names.includes(snapshotParam) ? snapshotParam : readable[0] ?? names[0];
  if (!snapshot) return <Empty>No memory snapshots in this run (torch.cuda.memory._dump_snapshot writes *.pickle).</Empty>;
  return (
    <div class="stack" data-testid="memory-snapshot">
      <Card title="Every snapshot of the run: peak and OOM per device">
        <Loaded state={ranks} errorTitle={failed ? cannotRead(props.run, failed) : 'Cannot compare the snapshots'}>
          {({ ranks: table, coverage, missing: left }) => (
            <>
              {left.rows.length ? <RankCoverage text={typedRows(coverage)[0].text} missing={left} /> : null}
              <DataTable
                id="snapshot-ranks"
                schema="SnapshotRanksTable"
                rows={typedRows(table)}
                csvColumns={table.columns}
                csvName={`${props.run}_memory_snapshots.csv`}
                rowKey={(r) => `${r.snapshot}|${r.device}`}
                columns={[
                  { key: 'snapshot', label: 'Snapshot', format: (v) => <button type="button" class="link" data-snapshot={String(v)} onClick={() => setSnapshot(String(v))}>{String(v)}</button> },
                  { key: 'device', label: 'Device', numeric: true },
                  { key: 'peak_allocated_bytes', label: 'Peak allocated', numeric: true, format: (v) => formatBytes(v) },
                  { key: 'peak_reserved_bytes', label: 'Peak reserved', numeric: true, format: (v) => formatBytes(v) },
                  { key: 'oom', label: 'OOM', format: (v) => (v ? 'yes' : 'no') },
                  { key: 'oom_requested_bytes', label: 'OOM asked for', numeric: true, format: (v, r) => (r.oom ? formatBytes(v) : '—') },
                  { key: 'entries', label: 'Entries', numeric: true },
                ]}
              />
            </>
          )}
        </Loaded>
      </Card>
      {ranks.status === 'loading' || failed ? null : readable.includes(snapshot) ? (
        <Snapshot key={snapshot} run={props.run} snapshot={snapshot} names={names} onSnapshot={setSnapshot} />
      ) : (
        <Empty>
          “{snapshot}” could not be read (the comparison above says why).{' '}
          {readable.length ? <button type="button" class="link" data-snapshot={readable[0]} onClick={() => setSnapshot(readable[0])}>Show {readable[0]}</button> : null}
        </Empty>
      )}
    </div>
  );
}

const cannotRead = (run: string, snapshot: string) => `Cannot read the memory snapshot “${snapshot}” of ${run}`;

/** The chosen snapshot, one the comparison above read. */
function Snapshot({ run, snapshot, names, onSnapshot }: { run: string; snapshot: string; names: string[]; onSnapshot: (name: string) => void }) {
  const base = { run, snapshot };
  const peak = useApi<'snapshot_peak'>('snapshot_peak', base);
  return (
    <Loaded state={peak} errorTitle={cannotRead(run, snapshot)}>
      {(table) => {
        const devices = typedRows(table).map((r) => r.device);
        return devices.length ? <Device {...base} devices={devices} names={names} onSnapshot={onSnapshot} /> : <Empty>This snapshot holds no device's trace or segments.</Empty>;
      }}
    </Loaded>
  );
}

function Device(props: { run: string; snapshot: string; devices: number[]; names: string[]; onSnapshot: (name: string) => void }) {
  const [deviceParam, setDevice] = useUrlParam('device', '');
  const device = props.devices.includes(Number(deviceParam)) && deviceParam !== '' ? Number(deviceParam) : props.devices[0];
  const [startParam, setStart] = useUrlParam('start_us', '');
  const [endParam, setEnd] = useUrlParam('end_us', '');
  const [entryParam, setEntry] = useUrlParam('entry', '');
  const zoomed = startParam !== '' && endParam !== '';
  const base = { run: props.run, snapshot: props.snapshot, device };
  const oom = useApi<'snapshot_oom', WireTableOf<'SnapshotOomTable'>>('snapshot_oom', { run: props.run, snapshot: props.snapshot });
  const card = oom.status === 'ok' ? typedRows(oom.data).find((r) => r.device === device) : undefined;
  // The moment examined: the one clicked, else the OOM (or peak) of the card.
  const entry = entryParam !== '' ? Number(entryParam) : card?.entry;
  const moment = entry === undefined ? null : { ...base, entry };
  const timeline = useApi<'snapshot_timeline', Timeline>('snapshot_timeline', { ...base, start_us: zoomed ? startParam : null, end_us: zoomed ? endParam : null, bins: WIDTH, bands: 60 });
  const name = `${props.run}_${props.snapshot}_${device}`;
  // The Kineto trace of the same rank, where it records the same time: its memory curve on this axis.
  const beside = useApi<'snapshot_trace', WireTableOf<'SnapshotTraceTable'>>('snapshot_trace', { run: props.run, snapshot: props.snapshot });
  const trace = beside.status === 'ok' ? typedRows(beside.data).find((r) => r.device === device && r.overlap_start_us !== null) : undefined;
  const curve = useApi<'memory_curve', MemoryCurveReply>(trace ? 'memory_curve' : null, { run: props.run, worker: trace?.worker, span: trace?.span, device: `GPU${device}` });
  const traceCurve = trace && curve.status === 'ok' ? { origin: trace.trace_origin_us, rows: typedRows(curve.data.curve) } : null;
  return (
    <>
      <div class="toolbar">
        <label>
          Snapshot
          <select data-control="snapshot" value={props.snapshot} onChange={(e) => props.onSnapshot((e.target as HTMLSelectElement).value)}>
            {props.names.map((n) => <option key={n} value={n}>{n}</option>)}
          </select>
        </label>
        <label>
          Device
          <select data-control="device" value={String(device)} onChange={(e) => { setDevice((e.target as HTMLSelectElement).value); setStart(null); setEnd(null); setEntry(null); }}>
            {props.devices.map((d) => <option key={d} value={String(d)}>cuda:{d}</option>)}
          </select>
        </label>
        <button type="button" data-control="reset-zoom" disabled={!zoomed} onClick={() => { setStart(null); setEnd(null); }}>Whole trace</button>
        <button type="button" data-control="reset-moment" disabled={entryParam === ''} onClick={() => setEntry(null)}>Back to the {card?.kind === 'oom' ? 'OOM' : 'peak'}</button>
      </div>
      {card ? <OomCard card={card} /> : null}
      <Card title={`Active memory on cuda:${device} (drag to zoom, click to choose the moment)`}>
        <Loaded state={timeline}>
          {(data) => (
            <TimelineChart
              data={data}
              traceCurve={traceCurve}
              entry={entry ?? null}
              onZoom={(from, to) => { setStart(String(from)); setEnd(String(to)); }}
              onMoment={(e) => setEntry(String(e))}
            />
          )}
        </Loaded>
      </Card>
      {trace ? (
        <Card title="Beside the trace">
          <dl class="facts" data-testid="snapshot-beside-trace">
            <dt>Trace</dt><dd>{trace.worker} span {trace.span} (its allocated memory: the blue line above)</dd>
            <dt>Both record</dt><dd>{formatDuration((trace.overlap_end_us ?? 0) - (trace.overlap_start_us ?? 0))}</dd>
            <dt>Peak in that time, snapshot</dt><dd>{formatBytes(trace.snapshot_peak_bytes)}</dd>
            <dt>Peak in that time, trace</dt><dd>{formatBytes(trace.trace_peak_bytes)}</dd>
          </dl>
        </Card>
      ) : null}
      {moment ? <Moment query={moment} name={name} /> : null}
    </>
  );
}

function OomCard({ card }: { card: RowOf<'SnapshotOomTable'> }) {
  const title = card.kind === 'oom' ? 'Out of memory' : 'Peak (no OOM in this trace)';
  return (
    <Card title={title} class="snapshot-oom">
      <dl class="facts" data-testid="snapshot-oom" data-kind={card.kind}>
        {card.kind === 'oom' ? (
          <>
            <dt>Asked for</dt><dd>{formatBytes(card.requested_bytes)}</dd>
            <dt>Free on the device</dt><dd>{formatBytes(card.device_free_bytes)}</dd>
          </>
        ) : null}
        <dt>Allocated</dt><dd>{formatBytes(card.allocated_bytes)}</dd>
        <dt>Reserved</dt><dd>{formatBytes(card.reserved_bytes)}</dd>
        <dt>Reserved but free (fragmentation)</dt>
        {card.anomaly ? (
          <dd class="anomaly" data-testid="snapshot-anomaly">not given: {card.anomaly}</dd>
        ) : (
          <dd>{formatBytes(card.fragmentation_bytes)} ({formatPct(card.fragmentation_pct)})</dd>
        )}
        <dt>Entry</dt><dd>{card.entry}</dd>
      </dl>
    </Card>
  );
}

/** The bands as the server placed them: one polygon per band (its points are the columns
 *  where it is alive, in time order), reserved memory as a line over them. */
function TimelineChart({ data, traceCurve, entry, onZoom, onMoment }: {
  data: Timeline;
  traceCurve: { origin: number; rows: RowOf<'MemoryCurveTable'>[] } | null;
  entry: number | null;
  onZoom: (from: number, to: number) => void;
  onMoment: (entry: number) => void;
}) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const bands = useMemo(() => new Map(typedRows(data.bands).map((b) => [b.band, b])), [data]);
  const points = useMemo(() => typedRows(data.points), [data]);
  const totals = useMemo(() => typedRows(data.totals), [data]);
  const [hover, setHover] = useState<{ x: number; y: number; band: Band; column: number } | null>(null);
  const [drag, setDrag] = useState<{ from: number; to: number } | null>(null);
  const t0 = totals.length ? totals[0].start_us : 0;
  const t1 = totals.length ? totals[totals.length - 1].time_us : 1;
  const span = Math.max(t1 - t0, 1);
  const top = Math.max(1, ...totals.map((t) => t.reserved_bytes), ...totals.map((t) => t.allocated_bytes));
  const xOf = (t: number) => LEFT + ((t - t0) / span) * (WIDTH - LEFT - 10);
  const yOf = (b: number) => HEIGHT - 20 - (b / top) * (HEIGHT - 30);
  const timeAt = (x: number) => t0 + ((x - LEFT) / (WIDTH - LEFT - 10)) * span;

  useEffect(() => {
    const c = canvas.current;
    const ctx = c?.getContext('2d');
    if (!c || !ctx) return;
    const ratio = window.devicePixelRatio || 1;
    c.width = WIDTH * ratio;
    c.height = HEIGHT * ratio;
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, WIDTH, HEIGHT);
    const style = getComputedStyle(c);
    ctx.fillStyle = style.color;
    ctx.font = '11px sans-serif';
    for (let i = 0; i <= 4; i += 1) {
      const y = yOf((top * i) / 4);
      ctx.fillText(formatBytes((top * i) / 4), 2, y + 4);
      ctx.globalAlpha = 0.15;
      ctx.fillRect(LEFT, y, WIDTH - LEFT - 10, 1);
      ctx.globalAlpha = 1;
    }
    ctx.fillText(`${formatDuration(0)}`, LEFT, HEIGHT - 4);
    ctx.fillText(`+${formatDuration(span)}`, WIDTH - 80, HEIGHT - 4);
    const byBand = new Map<number, typeof points>();
    for (const p of points) (byBand.get(p.band) ?? byBand.set(p.band, []).get(p.band)!).push(p);
    for (const [id, list] of byBand) {
      const band = bands.get(id);
      ctx.beginPath();
      list.forEach((p, i) => (i ? ctx.lineTo(xOf(p.time_us), yOf(p.high_bytes)) : ctx.moveTo(xOf(p.time_us), yOf(p.high_bytes))));
      for (let i = list.length - 1; i >= 0; i -= 1) ctx.lineTo(xOf(list[i].time_us), yOf(list[i].low_bytes));
      ctx.closePath();
      // Merged band grey; private pools (CUDA graphs, MemPools) in blues, the default pool in warm colours.
      ctx.fillStyle = id === 0 ? 'rgba(128,128,128,0.5)' : band?.private_pool ? `hsl(${200 + (id * 37) % 50}, 65%, 55%)` : `hsl(${(id * 47) % 160}, 70%, 55%)`;
      ctx.fill();
    }
    ctx.strokeStyle = style.color;
    ctx.setLineDash([4, 3]);
    ctx.beginPath();
    totals.forEach((t, i) => (i ? ctx.lineTo(xOf(t.time_us), yOf(t.reserved_bytes)) : ctx.moveTo(xOf(t.time_us), yOf(t.reserved_bytes))));
    ctx.stroke();
    ctx.setLineDash([]);
    if (traceCurve) {
      // The trace's times are relative to its origin, which the server gives on this clock.
      const inside = traceCurve.rows.filter((r) => traceCurve.origin + r.time_us >= t0 && traceCurve.origin + r.time_us <= t1);
      ctx.strokeStyle = 'hsl(220, 90%, 50%)';
      ctx.lineWidth = 2;
      ctx.beginPath();
      inside.forEach((r, i) => (i ? ctx.lineTo(xOf(traceCurve.origin + r.time_us), yOf(r.allocated_bytes)) : ctx.moveTo(xOf(traceCurve.origin + r.time_us), yOf(r.allocated_bytes))));
      ctx.stroke();
      ctx.lineWidth = 1;
    }
    const chosen = totals.find((t) => t.entry === entry);
    if (chosen) {
      ctx.strokeStyle = 'red';
      ctx.beginPath();
      ctx.moveTo(xOf(chosen.time_us), 5);
      ctx.lineTo(xOf(chosen.time_us), HEIGHT - 20);
      ctx.stroke();
    }
  }, [data, entry, traceCurve]);

  const column = (x: number) => {
    const t = timeAt(x);
    let best = 0;
    totals.forEach((c, i) => { if (Math.abs(c.time_us - t) < Math.abs(totals[best].time_us - t)) best = i; });
    return best;
  };
  const local = (e: MouseEvent) => {
    const rect = (e.currentTarget as HTMLCanvasElement).getBoundingClientRect();
    return { x: ((e.clientX - rect.left) / rect.width) * WIDTH, y: ((e.clientY - rect.top) / rect.height) * HEIGHT };
  };
  const onMove = (e: MouseEvent) => {
    const { x, y } = local(e);
    if (drag) setDrag({ ...drag, to: x });
    if (!totals.length) return;
    const i = column(x);
    const here = points.filter((p) => p.time_us === totals[i].time_us && yOf(p.high_bytes) <= y && y <= yOf(p.low_bytes));
    const band = here.length ? bands.get(here[here.length - 1].band) : undefined;
    setHover(band ? { x, y, band, column: i } : null);
  };
  const onUp = (e: MouseEvent) => {
    const { x } = local(e);
    if (drag && Math.abs(x - drag.from) > 5) onZoom(Math.min(timeAt(drag.from), timeAt(x)), Math.max(timeAt(drag.from), timeAt(x)));
    else if (totals.length) onMoment(totals[column(x)].entry);
    setDrag(null);
  };
  return (
    <div class="snapshot-timeline" data-testid="snapshot-timeline" data-bands={bands.size} style={{ position: 'relative' }}>
      <canvas
        ref={canvas}
        style={{ width: '100%', maxWidth: `${WIDTH}px`, height: 'auto', aspectRatio: `${WIDTH} / ${HEIGHT}`, cursor: 'crosshair' }}
        onMouseDown={(e) => setDrag({ from: local(e).x, to: local(e).x })}
        onMouseMove={onMove}
        onMouseUp={onUp}
        onMouseLeave={() => { setHover(null); setDrag(null); }}
      />
      {hover ? (
        <div class="tooltip" data-testid="snapshot-hover" style={{ position: 'absolute', left: `${(hover.x / WIDTH) * 100}%`, top: `${(hover.y / HEIGHT) * 100}%` }}>
          {hover.band.band === 0 ? (
            <div>Smaller allocations, merged: {formatBytes(hover.band.size_bytes)} at most in this window</div>
          ) : (
            <>
              <div><b>{formatBytes(hover.band.size_bytes)}</b> · {hover.band.category} · pool {hover.band.pool_id}{hover.band.private_pool ? ' (private)' : ''}</div>
              <div>{hover.band.top_frame || '(no stack)'}</div>
              <div>allocated {hover.band.alloc_us === null ? 'before the trace' : `at +${formatDuration(hover.band.alloc_us - t0)}`}, freed {hover.band.free_us === null ? 'never (alive at the snapshot)' : `at +${formatDuration(hover.band.free_us - t0)}`}</div>
            </>
          )}
        </div>
      ) : null}
      <div class="hint">Bands: the {Math.max(bands.size - 1, 0)} largest allocations alive in the window (warm: default pool, blue: private pools), grey: the others merged; dashed: reserved.</div>
    </div>
  );
}

function Moment({ query, name }: { query: { run: string; snapshot: string; device: number; entry: number }; name: string }) {
  const blame = useApi<'snapshot_blame', WireTableOf<'SnapshotBlameTable'>>('snapshot_blame', query);
  const categories = useApi<'snapshot_categories', WireTableOf<'SnapshotCategoriesTable'>>('snapshot_categories', query);
  const [library, setLibrary] = useState<'collapsed' | 'expanded'>('collapsed');
  const flame = useApi<'snapshot_flame', WireTableOf<'SnapshotFlameTable'>>('snapshot_flame', { ...query, library });
  const state = useApi<'snapshot_state', WireTableOf<'SnapshotStateTable'>>('snapshot_state', query);
  return (
    <>
      <Card title={`Who holds the memory at entry ${query.entry}: by the innermost frame of your code`}>
        <Loaded state={blame}>
          {(table) => (
            <DataTable
              id="snapshot-blame"
              schema="SnapshotBlameTable"
              rows={typedRows(table)}
              csvColumns={table.columns}
              csvName={`${name}_blame.csv`}
              rowKey={(r) => r.frame}
              columns={[
                { key: 'frame', label: 'Frame', wide: true },
                { key: 'live_bytes', label: 'Live', numeric: true, format: (v) => formatBytes(v) },
                { key: 'requested_bytes', label: 'Requested', numeric: true, format: (v) => formatBytes(v) },
                { key: 'allocations', label: 'Allocations', numeric: true },
                { key: 'share_pct', label: 'Share', numeric: true, format: (v) => formatPct(v) },
              ]}
            />
          )}
        </Loaded>
      </Card>
      <Card title="By category (how each is decided)">
        <Loaded state={categories}>
          {(table) => (
            <DataTable
              id="snapshot-categories"
              schema="SnapshotCategoriesTable"
              rows={typedRows(table)}
              csvColumns={table.columns}
              csvName={`${name}_categories.csv`}
              rowKey={(r) => r.category}
              columns={[
                { key: 'category', label: 'Category' },
                { key: 'live_bytes', label: 'Live', numeric: true, format: (v) => formatBytes(v) },
                { key: 'allocations', label: 'Allocations', numeric: true },
                { key: 'rule', label: 'Decided by', wide: true },
              ]}
            />
          )}
        </Loaded>
      </Card>
      <Card title="Flame graph of live memory">
        <label>
          <input type="checkbox" data-control="expand-library" checked={library === 'expanded'} onChange={(e) => setLibrary((e.target as HTMLInputElement).checked ? 'expanded' : 'collapsed')} />
          Show library frames
        </label>
        <Loaded state={flame}>{(table) => <Flame rows={typedRows(table)} />}</Loaded>
      </Card>
      <Card title="Allocator state (segments and their blocks)">
        <Loaded state={state}>
          {(table) => (
            <DataTable
              id="snapshot-state"
              schema="SnapshotStateTable"
              rows={typedRows(table)}
              csvColumns={table.columns}
              csvName={`${name}_state.csv`}
              rowKey={(r) => String(r.address)}
              columns={[
                { key: 'segment_address', label: 'Segment', format: (v) => `0x${v.toString(16)}` },
                { key: 'pool_id', label: 'Pool' },
                { key: 'address', label: 'Block', format: (v) => `0x${v.toString(16)}` },
                { key: 'size_bytes', label: 'Size', numeric: true, format: (v) => formatBytes(v) },
                { key: 'allocated', label: 'State', format: (v) => (v ? 'allocated' : 'free') },
                { key: 'top_frame', label: 'Allocated at', wide: true },
              ]}
            />
          )}
        </Loaded>
      </Card>
    </>
  );
}

/** The flame graph's nodes as the server lists them: each placed under its parent, widths by
 *  the bytes the server gives each node. */
function Flame({ rows }: { rows: RowOf<'SnapshotFlameTable'>[] }) {
  const placed = useMemo(() => {
    const offset = new Map<number, number>([[-1, 0]]);
    const used = new Map<number, number>();
    const total = rows.find((r) => r.parent === -1)?.live_bytes || 1;
    return rows.map((r) => {
      const start = (offset.get(r.parent) ?? 0) + (used.get(r.parent) ?? 0);
      used.set(r.parent, (used.get(r.parent) ?? 0) + r.live_bytes);
      offset.set(r.node, start);
      return { row: r, left: start / total, width: r.live_bytes / total };
    });
  }, [rows]);
  const depth = rows.reduce((d, r) => Math.max(d, r.depth), 0) + 1;
  return (
    <div class="snapshot-flame" data-testid="snapshot-flame" style={{ position: 'relative', height: `${depth * 22}px` }}>
      {placed.filter((p) => p.width > 0.002).map((p) => (
        <div
          key={p.row.node}
          class={p.row.library ? 'flame-frame library' : 'flame-frame'}
          title={`${p.row.frame}: ${formatBytes(p.row.live_bytes)}`}
          style={{ position: 'absolute', left: `${p.left * 100}%`, width: `${p.width * 100}%`, top: `${p.row.depth * 22}px`, height: '20px', overflow: 'hidden', whiteSpace: 'nowrap', fontSize: '11px', background: p.row.library ? 'hsl(210, 30%, 70%)' : `hsl(${20 + (p.row.node * 13) % 40}, 80%, 65%)`, color: '#222', borderRight: '1px solid #fff', boxSizing: 'border-box', padding: '2px 4px' }}
        >
          {p.row.frame.split('/').pop()} · {formatBytes(p.row.live_bytes)}
        </div>
      ))}
    </div>
  );
}
