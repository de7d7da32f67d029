// Trace view: the whole trace on a canvas timeline that asks the server for exactly what it
// draws (/timeline_slices at one pixel's resolution; short events arrive merged into
// blocks). Tracks grouped by process (collapsible), counters above them, a ruler in µs/ms/s
// with the steps; zoom/pan with wheel, drag and W/S/A/D; click an event for its details and
// flow arrows; shift+drag a range for per-name totals; search with next/previous; jump to a
// step; draw a step's critical path on the tracks (/timeline_critical_path); hide the
// Python-frame tracks; download the original file. The visible window, the selected event and
// whether Python frames are shown are kept in the page URL (trace_start_us, trace_end_us,
// trace_event, trace_python), and so are the shift+dragged range (trace_range_start_us,
// trace_range_end_us), which other views set to highlight a range, and the critical path drawn
// and its selected segment (trace_path, trace_path_segment), which the GPU idle view sets.

import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { describeError, fetchJson, inReport, routeUrl } from '../../api/client';
import type {
  CounterSeries,
  TimelineEndpoint,
  TimelineEventReply,
  TimelineFlowsReply,
  TimelineSearchReply,
  TimelineTracksReply,
  ViewProps,
} from '../../api/types';
import { typedRows, type WireTableOf } from '../../api/tables';
import { useApi, type ApiState } from '../../api/useApi';
import { formatDuration, formatNumber, formatPct, plural } from '../../base/format';
import { beginWork } from '../../base/ready';
import { setParams } from '../../base/url';
import { categoryColour, categoryLabel } from '../../components/criticalPath';
import { Card, Empty, ErrorBox, Loaded } from '../../components/Status';
import { DataTable } from '../../components/table/DataTable';
import { useUrlParam } from '../../components/useUrlParam';
import { Details } from './Details';
import { useTimelineData } from './data';
import type { Range, Step } from './draw';
import { bounds, centreOn, groupKey, groupTracks, idlePythonTracks, layout, pathArrows, placeCounters, stepWindow, trackKey, windowLabel, type PathSegment, type TrackInfo } from './logic';
import { RanksTrace } from './RanksTrace';
import { numberParam, useUrlRange, useUrlWindow } from './urlWindow';
import { Timeline, type SliceHit } from './Timeline';

export function TraceView(props: ViewProps) {
  useEffect(() => {
    performance.mark('trace-view-open');
  }, []);
  const workers = props.runs.find((r) => r.name === props.run)?.workers.length ?? 1;
  const [ranks] = useUrlParam('trace_ranks', '');
  const several = workers > 1 && ranks !== '';
  // one trace's times and the ranks' shared axis differ: a window, range or event of one
  // means nothing in the other
  const setRanks = (next: string | null) =>
    setParams({ trace_ranks: next, trace_start_us: null, trace_end_us: null, trace_event: null, trace_rank_open: null,
      trace_range_start_us: null, trace_range_end_us: null });
  return (
    <div class="stack" data-testid="trace">
      {workers > 1 ? <RanksControl ranks={ranks} onRanks={setRanks} /> : null}
      {several ? <RanksTrace {...props} ranks={ranks} /> : <OneTrace {...props} />}
    </div>
  );
}

function OneTrace(props: ViewProps) {
  const base = { run: props.run, worker: props.worker, span: props.span };
  const tracks = useApi<'timeline_tracks', TimelineTracksReply>('timeline_tracks', base);
  return (
    <Loaded state={tracks} label="Building the timeline…">
      {(data) => (data.tracks.rows.length ? <Trace {...props} info={data} /> : <Empty>This trace has no events to show on a timeline.</Empty>)}
    </Loaded>
  );
}

/** Which ranks the timeline shows: this worker's trace (''), all ranks ('all'), or some ('0,3'). */
function RanksControl({ ranks, onRanks }: { ranks: string; onRanks: (ranks: string | null) => void }) {
  const mode = ranks === '' ? 'this' : ranks === 'all' ? 'all' : 'pick';
  const [text, setText] = useState(mode === 'pick' ? ranks : '0,1');
  useEffect(() => {
    if (mode === 'pick') setText(ranks);
  }, [ranks]);
  const pick = () => {
    const list = text.split(/[\s,]+/).filter((r) => /^\d+$/.test(r));
    onRanks(list.length ? [...new Set(list)].sort((a, b) => Number(a) - Number(b)).join(',') : null);
  };
  return (
    <div class="toolbar trace-toolbar">
      <label title="Show this worker's trace, or several ranks of this span on one time axis">
        Ranks
        <select
          data-control="trace-ranks"
          value={mode}
          onChange={(e) => {
            const value = (e.target as HTMLSelectElement).value;
            if (value === 'this') onRanks(null);
            else if (value === 'all') onRanks('all');
            else pick();
          }}
        >
          <option value="this">This worker only</option>
          <option value="all">All ranks</option>
          <option value="pick">Pick ranks…</option>
        </select>
      </label>
      {mode === 'pick' ? (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            pick();
          }}
        >
          <input
            type="text"
            data-control="trace-rank-list"
            aria-label="Ranks to show, comma-separated"
            placeholder="0,1,7"
            value={text}
            onInput={(e) => setText((e.target as HTMLInputElement).value)}
          />
          <button type="submit" data-control="trace-rank-show">Show</button>
        </form>
      ) : null}
    </div>
  );
}

function Trace(props: ViewProps & { info: TimelineTracksReply }) {
  const { info } = props;
  const base = useMemo(() => ({ run: props.run, worker: props.worker, span: props.span }), [props.run, props.worker, props.span]);
  const trackList = useMemo<TrackInfo[]>(() => typedRows(info.tracks).map((r) => ({
    track: r.track,
    kind: r.kind,
    process: r.process,
    thread: r.thread,
    pid: r.pid,
    tid: r.tid,
    lanes: r.lanes,
    events: r.events,
  })), [info]);
  const trackMap = useMemo(() => new Map(trackList.map((t) => [t.track, t])), [trackList]);
  // Python frames (with_stack=True) can hold more rows than everything else: they can be hidden.
  const hasPython = useMemo(() => trackList.some((t) => t.kind === 'python'), [trackList]);
  const [pythonParam, setPythonParam] = useUrlParam('trace_python', '1');
  const showPython = pythonParam !== '0';
  const groups = useMemo(() => groupTracks(showPython ? trackList : trackList.filter((t) => t.kind !== 'python')), [trackList, showPython]);
  const steps = useMemo<Step[]>(() => typedRows(info.steps).map((r) => ({ step: r.step, start_us: r.start_us, end_us: r.end_us })), [info]);
  const limit = useMemo(() => bounds(info.start_us, info.end_us), [info]);

  // A step's critical path drawn over the tracks; opened without a window, the view frames the step.
  const [pathParam, setPathParam] = useUrlParam('trace_path', '');
  const pathStep = steps.find((s) => String(s.step) === pathParam) ?? null;
  const [view, setView] = useUrlWindow(limit, pathStep ? stepWindow(pathStep) : limit);
  const pathTable = useApi<'timeline_critical_path', WireTableOf<'TimelineCriticalPathTable'>>(pathStep ? 'timeline_critical_path' : null, { ...base, step: pathStep?.step ?? null });
  const path = useMemo(() => {
    if (!pathStep || pathTable.status !== 'ok') return null;
    const segments: PathSegment[] = typedRows(pathTable.data).map((r) => ({
      category: r.category,
      start: r.start_us,
      end: r.end_us,
      dur: r.dur_us,
      name: r.name,
      operator: r.operator,
      track: r.track,
    }));
    return { step: pathStep.step, segments, arrows: pathArrows(segments) };
  }, [pathStep?.step, pathTable]);
  const [segmentParam, setSegmentParam] = useUrlParam('trace_path_segment', '');
  const segmentIndex = numberParam(segmentParam);
  const pathSelected = path && segmentIndex !== null && segmentIndex >= 0 && segmentIndex < path.segments.length ? segmentIndex : -1;
  const showPath = (step: Step | null) => {
    setPathParam(step ? String(step.step) : null);
    setSegmentParam(null);
    if (step) setView(stepWindow(step));
  };

  const [collapsed, setCollapsed] = useState<Set<string>>(() => new Set(idlePythonTracks(trackList).map(trackKey)));
  const toggle = useCallback((key: string) => {
    setCollapsed((old) => {
      const next = new Set(old);
      if (next.has(key)) next.delete(key);
      else next.add(key);
      return next;
    });
  }, []);

  const [plotWidth, setPlotWidth] = useState(0);
  // the counter series (name and pid) shown: they change only when the series do (not on
  // every pan), so the layout stays put
  const [counterSeries, setCounterSeries] = useState<CounterSeries[]>([]);
  const placed = useMemo(() => placeCounters(counterSeries, groups), [counterSeries, groups]);
  const shape = useMemo(() => layout(groups, placed.top, collapsed, placed.byGroup), [groups, placed, collapsed]);
  const tracksParam = shape.visibleTracks.length === trackList.length ? '' : shape.visibleTracks.join(',') || '-1';
  const data = useTimelineData(base, view, plotWidth, tracksParam);
  useEffect(() => {
    const key = (series: readonly CounterSeries[]) => series.map((c) => `${c.pid ?? ''}\u0001${c.name}`).join('\u0000');
    if (data.counters && key(data.counters) !== key(counterSeries)) setCounterSeries(data.counters);
  }, [data.counters]);

  // Selection: the event id (in the URL) and where it is, once known.
  const [eventParam, setEventParam] = useUrlParam('trace_event', '');
  const selectedId = numberParam(eventParam);
  const [where, setWhere] = useState<TimelineEndpoint | null>(null);
  const [reveal, setReveal] = useState(0);
  const centreWhenKnown = useRef(false);
  const details = useApi<'timeline_event', TimelineEventReply>(selectedId !== null ? 'timeline_event' : null, { ...base, event: selectedId });
  const flows = useApi<'timeline_flows', TimelineFlowsReply>(selectedId !== null ? 'timeline_flows' : null, { ...base, event: selectedId });
  const known = details.status === 'ok' && details.data.event === selectedId ? details.data : null;
  const selected: TimelineEndpoint | null = where && where.event === selectedId ? where : known;

  const expandFor = (track: number) => {
    const info = trackMap.get(track);
    if (!info) return;
    if (info.kind === 'python' && !showPython) setPythonParam('1');
    if (collapsed.has(groupKey(info))) toggle(groupKey(info));
    if (collapsed.has(trackKey(info))) toggle(trackKey(info));
  };
  const goTo = useCallback((endpoint: TimelineEndpoint) => {
    setEventParam(String(endpoint.event));
    if (endpoint.track < 0) {
      setWhere(null);
      centreWhenKnown.current = true;
      return;
    }
    setWhere(endpoint);
    expandFor(endpoint.track);
    setView((v) => centreOn(v, endpoint.ts_us, endpoint.ts_us + endpoint.dur_us, limit));
    setReveal((n) => n + 1);
  }, [trackMap, collapsed, showPython, limit]);
  useEffect(() => {
    if (known && centreWhenKnown.current) {
      centreWhenKnown.current = false;
      goTo(known);
    }
  }, [known]);

  // The path's tracks are shown: their process groups open when a path arrives.
  useEffect(() => {
    if (!path) return;
    const keys = new Set(path.segments.map((s) => trackMap.get(s.track)).filter((t): t is TrackInfo => !!t).map(groupKey));
    setCollapsed((old) => ([...keys].some((k) => old.has(k)) ? new Set([...old].filter((k) => !keys.has(k))) : old));
  }, [path]);
  // ... and the first of its tracks from the top is scrolled into view, once per path opened
  // (Perfetto and Nsight bring the rows of a selection into view): in torch 2.x traces the
  // first tracks are background threads' Python frames, many lanes deep, above the path.
  const [focusTrack, setFocusTrack] = useState<{ track: number; n: number } | null>(null);
  useEffect(() => {
    if (!path) return;
    const tops = path.segments.map((s) => [s.track, shape.trackTop.get(s.track)] as const).filter((t): t is readonly [number, number] => t[1] !== undefined);
    if (!tops.length) return;
    const [track] = tops.reduce((a, b) => (b[1] < a[1] ? b : a));
    setFocusTrack((old) => (old && old.track === track && old.n === path.step ? old : { track, n: path.step }));
  }, [path, shape]);
  // Stepping along the path (centre): the segment centred in time, and its track opened and
  // scrolled into view, as a selection's is (a path that moves to a stream far below its CPU
  // thread left the segment chosen off screen).
  const selectSegment = (index: number, centre: boolean) => {
    setSegmentParam(String(index));
    const seg = path?.segments[index];
    if (!seg || !centre) return;
    setView((v) => centreOn(v, seg.start, seg.end, limit));
    if (seg.track >= 0) {
      expandFor(seg.track);
      setFocusTrack({ track: seg.track, n: index });
    }
  };

  const onSelect = useCallback((hit: SliceHit | null) => {
    if (!hit) {
      setEventParam(null);
      setWhere(null);
      return;
    }
    setWhere({ event: hit.event, track: hit.track, lane: hit.lane, ts_us: hit.start, dur_us: hit.dur });
    setEventParam(String(hit.event));
  }, []);

  // The highlighted range, from the URL when another view links to the events behind a number.
  const [range, setRange] = useUrlRange();

  const operatorHref = (name: string) => {
    const url = new URL(window.location.href);
    url.searchParams.set('view', 'operator');
    url.searchParams.set('op_search', name);
    return url.href;
  };
  const openOperator = (name: string) => setParams({ view: 'operator', op_search: name });

  return (
    <>
      <div class="toolbar trace-toolbar">
        <Search base={base} selected={selected} onFound={goTo} />
        {steps.length ? (
          <label>
            Jump to step
            <select
              data-control="trace-step"
              value=''
              onChange={(e) => {
                const step = steps.find((s) => String(s.step) === (e.target as HTMLSelectElement).value);
                if (step) setView(stepWindow(step));
              }}
            >
              <option value="">—</option>
              {steps.map((s) => (
                <option key={s.step} value={String(s.step)}>step {s.step} ({formatDuration(s.end_us - s.start_us)})</option>
              ))}
            </select>
          </label>
        ) : null}
        {steps.length ? (
          <label title="Draw a step's critical path on the tracks: the chain of CPU work, launches, device work and waits that decides its length">
            Critical path
            <select
              data-control="trace-path"
              value={pathStep ? String(pathStep.step) : ''}
              onChange={(e) => showPath(steps.find((s) => String(s.step) === (e.target as HTMLSelectElement).value) ?? null)}
            >
              <option value="">off</option>
              {steps.map((s) => (
                <option key={s.step} value={String(s.step)}>step {s.step}</option>
              ))}
            </select>
          </label>
        ) : null}
        <button type="button" data-control="trace-reset" onClick={() => setView(limit)}>Whole trace</button>
        {hasPython ? (
          <label title="The Python call stack of each thread (recorded with with_stack=True), one track per thread">
            <input
              type="checkbox"
              data-control="trace-python"
              checked={showPython}
              onChange={(e) => setPythonParam((e.target as HTMLInputElement).checked ? '1' : '0')}
            />
            Python frames
          </label>
        ) : null}
        <span class="hint" data-testid="trace-window">{windowLabel(view)}</span>
        <span class="spacer" />
        {inReport ? (
          <span class="hint" data-link="trace-file">the trace file is not in this report: TensorBoard serves it</span>
        ) : (
          <a href={routeUrl('trace_file', base)} download data-link="trace-file">Download trace</a>
        )}
      </div>
      <div class="hint trace-help">
        Wheel or <kbd>W</kbd>/<kbd>S</kbd>: zoom · drag or <kbd>A</kbd>/<kbd>D</kbd>: pan · shift+wheel: scroll the tracks · shift+drag: totals of a range ·
        click: details. Hatched blocks are runs of events shorter than a pixel, merged (hover for how many; click to zoom in).
        Other viewers: download the trace and open it in Perfetto (ui.perfetto.dev, “Open trace file”) or chrome://tracing; it never leaves your machine unless you do so.
      </div>
      {data.error ? <ErrorBox title="Cannot load this part of the timeline" reason={data.error} /> : null}
      <Timeline
        layout={shape}
        limit={limit}
        view={view}
        onView={setView}
        slices={data.slices}
        counters={data.counters}
        steps={steps}
        selected={selected}
        onSelect={onSelect}
        flows={selected && flows.status === 'ok' && flows.data.event === selected.event ? flows.data.flows : []}
        range={range}
        onRange={setRange}
        onToggle={toggle}
        reveal={reveal}
        focusTrack={focusTrack}
        onPlotWidth={setPlotWidth}
        requests={data.requests}
        path={path}
        pathSelected={pathSelected}
        onPathSelect={(i) => selectSegment(i, false)}
      />
      {pathStep ? (
        <PathCard
          base={base}
          step={pathStep}
          table={pathTable}
          path={path}
          selected={pathSelected}
          tracks={trackMap}
          onSelect={(i) => selectSegment(i, true)}
          onOff={() => showPath(null)}
        />
      ) : null}
      {selectedId === null && !range ? (
        <div class="hint" data-testid="trace-nothing-selected">
          Click an event for its details and flow arrows; shift+drag across the timeline for the total time per name in a range.
        </div>
      ) : null}
      {range ? <Summary base={base} range={range} total={trackList.length} onClear={() => setRange(null)} /> : null}
      {selectedId !== null ? (
        <Details event={details} flows={flows} tracks={trackMap} operatorHref={operatorHref} onOperatorLink={openOperator} onGoTo={goTo} />
      ) : null}
    </>
  );
}

/** The critical path drawn on the timeline: a legend with the time per category on the path
 *  (/critical_path table=categories), the selected segment, and stepping along the path. */
function PathCard(props: {
  base: Record<string, string | number>;
  step: Step;
  table: ApiState<WireTableOf<'TimelineCriticalPathTable'>>;
  path: { segments: PathSegment[]; arrows: [number, number][] } | null;
  selected: number;
  tracks: Map<number, TrackInfo>;
  onSelect: (segment: number) => void;
  onOff: () => void;
}) {
  const { step, path, selected, tracks } = props;
  const categories = useApi<'critical_path', WireTableOf<'CriticalPathCategoriesTable'>>('critical_path', { ...props.base, step: step.step, table: 'categories' });
  const seg = path && selected >= 0 ? path.segments[selected] : null;
  const where = seg ? tracks.get(seg.track) : undefined;
  return (
    <Card title={`Critical path of step ${step.step} (${formatDuration(step.end_us - step.start_us)})`}>
      <div class="toolbar">
        <Loaded state={categories}>
          {(table) => (
            <div class="path-legend" data-testid="trace-path-legend">
              {typedRows(table).filter((r) => r.time_us > 0).map((r) => (
                <span key={r.category} class="path-legend-item" data-category={r.category} data-time-us={String(r.time_us)}>
                  <span class="swatch" style={{ background: categoryColour(r.category) }} />
                  {categoryLabel(r.category)} {formatDuration(r.time_us)} ({formatPct(r.share_pct)})
                </span>
              ))}
            </div>
          )}
        </Loaded>
        <span class="spacer" />
        <button type="button" data-control="trace-path-off" onClick={props.onOff}>Hide the path</button>
      </div>
      <Loaded state={props.table} label="Finding the critical path…">
        {() =>
          path ? (
            <div data-testid="trace-path" data-segments={String(path.segments.length)} data-arrows={String(path.arrows.length)}>
              <div class="hint">
                {plural(path.segments.length, 'segment')} from the step’s start to its end, {plural(path.arrows.length, 'move')} to another track (the arrows).
                Everything off the path is dimmed; hover or click a highlighted segment for its category, duration and operator.
              </div>
              {seg ? (
                <div class="toolbar" data-testid="trace-path-segment" data-segment={String(selected)} data-category={seg.category}>
                  <button type="button" data-control="trace-path-prev" disabled={selected <= 0} onClick={() => props.onSelect(selected - 1)}>◀</button>
                  <span>
                    <span class="swatch" style={{ background: categoryColour(seg.category) }} /> <b>{categoryLabel(seg.category)}</b> · {formatDuration(seg.dur)} at{' '}
                    {formatDuration(seg.start)}
                    {seg.operator ? ` · operator ${seg.operator}` : ''}
                    {seg.name ? ` · ${seg.name.length > 80 ? `${seg.name.slice(0, 79)}…` : seg.name}` : ''}
                    {where ? ` · on ${where.process} / ${where.thread}` : ''} ({formatNumber(selected + 1)} of {formatNumber(path.segments.length)})
                  </span>
                  <button type="button" data-control="trace-path-next" disabled={selected >= path.segments.length - 1} onClick={() => props.onSelect(selected + 1)}>▶</button>
                </div>
              ) : (
                <div class="toolbar">
                  <button type="button" data-control="trace-path-first" onClick={() => props.onSelect(0)}>Go along the path from its start</button>
                </div>
              )}
            </div>
          ) : null
        }
      </Loaded>
    </Card>
  );
}

function Summary({ base, range, total, onClear }: { base: Record<string, string | number>; range: Range; total: number; onClear: () => void }) {
  const tracks = range.tracks.length && range.tracks.length < total ? range.tracks.join(',') : null;
  const state = useApi<'timeline_summary', WireTableOf<'TimelineSummaryTable'>>('timeline_summary', { ...base, start_us: range.start, end_us: range.end, tracks });
  return (
    <Card title={`Range ${formatDuration(range.start)} – ${formatDuration(range.end)} (${formatDuration(range.end - range.start)})`}>
      <div
        class="hint"
        data-testid="trace-range"
        data-start-us={String(range.start)}
        data-end-us={String(range.end)}
        data-tracks={tracks ?? ''}
      >
        {tracks ? `${range.tracks.length} of ${total} tracks` : 'all tracks'} ·{' '}
        <button type="button" class="link-button" data-control="trace-clear-range" onClick={onClear}>clear</button>
      </div>
      <Loaded state={state}>
        {(table) => (
          <DataTable
            id="trace-summary"
            schema="TimelineSummaryTable"
            rows={typedRows(table)}
            csvColumns={table.columns}
            csvName={`${base.run}_${base.worker}_${base.span}_range_summary.csv`}
            searches={[{ label: 'Search names', keys: ['name', 'kind'] }]}
            defaultSort={{ key: 'total_us', dir: 'desc' }}
            rowKey={(r) => `${r.name}|${r.kind}`}
            columns={[
              { key: 'name', label: 'Name' },
              { key: 'kind', label: 'Kind' },
              { key: 'count', label: 'Count', numeric: true, format: (v) => formatNumber(v) },
              { key: 'total_us', label: 'Total in range', numeric: true, format: (v) => formatDuration(v) },
            ]}
          />
        )}
      </Loaded>
    </Card>
  );
}

function Search({ base, selected, onFound }: { base: Record<string, string | number>; selected: TimelineEndpoint | null; onFound: (e: TimelineEndpoint) => void }) {
  const [query, setQuery] = useUrlParam('trace_q', '');
  const [text, setText] = useState(query);
  const [reply, setReply] = useState<{ q: string; data: TimelineSearchReply; at: number } | null>(null);
  const [error, setError] = useState('');
  const busy = useRef(false);

  const ask = async (direction: 'next' | 'prev') => {
    const q = text.trim();
    if (!q || busy.current) return;
    setQuery(q);
    // Within the matches already listed, step locally; ask the server past their ends.
    if (reply && reply.q === q && reply.data.results.length) {
      const at = reply.at + (direction === 'next' ? 1 : -1);
      if (at >= 0 && at < reply.data.results.length) {
        setReply({ ...reply, at });
        onFound(reply.data.results[at]);
        return;
      }
    }
    const current = reply && reply.q === q ? reply.data.results[reply.at] : selected;
    busy.current = true;
    const done = beginWork();
    try {
      // stepping from the current match by its id visits matches that start together one by one
      const from = current ? { after_event: current.event } : { after_us: null };
      const data = await fetchJson<'timeline_search', TimelineSearchReply>('timeline_search', { ...base, q, direction, ...from });
      setError('');
      if (!data.match) {
        setReply({ q, data, at: 0 });
        return;
      }
      const list = direction === 'next' ? data.results : [data.match];
      setReply({ q, data: { ...data, results: list }, at: 0 });
      onFound(data.match);
    } catch (err) {
      setError(describeError(err));
    } finally {
      busy.current = false;
      done();
    }
  };

  const current = reply && reply.q === text.trim() ? reply.data.results[reply.at] : null;
  return (
    <form
      class="trace-search"
      onSubmit={(e) => {
        e.preventDefault();
        ask('next');
      }}
    >
      <input
        type="search"
        data-control="trace-search"
        placeholder="Search events by name"
        aria-label="Search events by name"
        value={text}
        onInput={(e) => setText((e.target as HTMLInputElement).value)}
      />
      <button type="button" data-control="trace-prev" title="Previous match" onClick={() => ask('prev')}>◀</button>
      <button type="button" data-control="trace-next" title="Next match" onClick={() => ask('next')}>▶</button>
      <span class="hint" data-testid="trace-search-status" data-total={reply ? String(reply.data.total) : ''} data-match={current ? String(current.event) : ''}>
        {error ? <span class="error">{error}</span> : reply && reply.q === text.trim() ? (reply.data.total ? `${formatNumber(reply.data.position + reply.at + 1)} of ${formatNumber(reply.data.total)} · ${current?.name ?? ''} at ${formatDuration(current?.ts_us)}` : 'no match') : ''}
      </span>
    </form>
  );
}
