// Several ranks of one span on one time axis (the Trace view's ranks mode): one collapsible
// group of tracks per rank, headed by the rank, its worker and the clock offset applied. A
// collapsed rank draws one summary track (its busy time, from a small per-rank summary the
// server keeps); expanding it loads that rank's profile and draws its own tracks. Times are on
// the reference rank's axis (µs from its first event), each rank moved by the server's
// shift_us (origin difference plus clock offset; offset 0 with clock alignment off). The same
// canvas timeline as one trace: zoom and pan alike. URL state: trace_ranks (all or a list),
// trace_rank_open (the ranks expanded), align_clocks (shared with the Job view), the window,
// trace_q (the search), the shift+dragged range. Clicking an event of an expanded rank shows its details and flow
// arrows from that rank's own routes (/timeline_event, /timeline_flows with its worker),
// placed on the shared axis. Over the expanded ranks: each one's counters in its group
// (/timeline_rank_counters), search by name and shift+drag range totals (RankTools.tsx).

import { useCallback, useEffect, useMemo, useState } from 'preact/hooks';
import type {
  CounterSeries,
  RankSearchHit,
  TimelineEndpoint,
  TimelineEventReply,
  TimelineFlow,
  TimelineFlowsReply,
  TimelineRankCountersReply,
  TimelineRanksReply,
  ViewProps,
} from '../../api/types';
import { columnDoc, typedRows } from '../../api/tables';
import { useApi } from '../../api/useApi';
import { formatDuration } from '../../base/format';
import { PROFILE_SELECTIONS, setParams } from '../../base/url';
import { Card, ErrorBox, Loaded } from '../../components/Status';
import { DataTable } from '../../components/table/DataTable';
import { useUrlParam } from '../../components/useUrlParam';
import { useTimelineData, type TimelineRoutes } from './data';
import { Details } from './Details';
import { bounds, centreOn, groupTracks, layout, windowLabel, type GroupCounter, type TrackInfo } from './logic';
import { expandable, RankSummary, useRankSearch } from './RankTools';
import { useUrlRange, useUrlWindow } from './urlWindow';
import { Timeline, type SliceHit } from './Timeline';

const ROUTES: TimelineRoutes = { slices: 'timeline_rank_slices', counters: 'timeline_rank_counters' };
const NO_STEPS: never[] = [];
const NOTHING = new Set<string>();
/** Track ids of one rank on the shared axis: its summary track is rank position x STRIDE, its
 *  own track t is that + 1 + t (`RANK_TRACK_STRIDE` in views/rank_timeline.py). */
const RANK_TRACK_STRIDE = 1 << 20;

interface RankRow {
  rank: number;
  worker: string;
  track: number;
  shift_us: number;
}

/** An endpoint of one rank's own trace (its track ids, its times) on the shared axis. */
export function onAxis(rank: Pick<RankRow, 'track' | 'shift_us'>, e: TimelineEndpoint): TimelineEndpoint {
  return { ...e, track: e.track < 0 ? -1 : rank.track + 1 + e.track, ts_us: e.ts_us + rank.shift_us };
}

/** The series of the expanded ranks, each named apart by its rank (the counter rows' key). */
export function rankCounters(series: TimelineRankCountersReply['counters']): CounterSeries[] {
  return series.map((s) => ({ ...s, name: `Rank ${s.rank} · ${s.name}` }));
}

/** "+1.2 ms" / "-300 µs": a signed duration. */
export function signedDuration(us: number): string {
  return `${us < 0 ? '−' : '+'}${formatDuration(Math.abs(us))}`;
}

export function RanksTrace(props: ViewProps & { ranks: string }) {
  const [align, setAlign] = useUrlParam('align_clocks', 'true');
  const [openParam, setOpenParam] = useUrlParam('trace_rank_open', '');
  const query = { run: props.run, span: props.span, ranks: props.ranks, expanded: openParam || null, align_clocks: align };
  const state = useApi<'timeline_ranks', TimelineRanksReply>('timeline_ranks', query);
  const open = useMemo(() => new Set(openParam.split(',').filter((r) => r !== '')), [openParam]);
  const toggle = useCallback((rank: string) => {
    const next = new Set(open);
    if (next.has(rank)) next.delete(rank);
    else next.add(rank);
    setOpenParam([...next].sort((a, b) => Number(a) - Number(b)).join(',') || null);
  }, [open]);
  const expand = useCallback((ranks: number[]) => {
    const next = new Set([...open, ...expandable(ranks.filter((r) => !open.has(String(r))), open.size).map(String)]);
    setOpenParam([...next].sort((a, b) => Number(a) - Number(b)).join(',') || null);
  }, [open]);
  return (
    <>
      <div class="toolbar trace-toolbar">
        <label title="Move each rank by the offset that makes matched collectives end together (clocks of different hosts disagree); off: raw timestamps">
          <input
            type="checkbox"
            data-control="trace-align"
            checked={align !== 'false'}
            onChange={(e) => setAlign((e.target as HTMLInputElement).checked ? 'true' : 'false')}
          />
          Align clocks by collectives
        </label>
        {open.size ? <button type="button" data-control="trace-collapse-ranks" onClick={() => setOpenParam(null)}>Collapse all ranks</button> : null}
      </div>
      <Loaded state={state} label="Reading every rank's summary…">
        {(data) => <RanksTimeline {...props} data={data} query={query} open={open} onToggle={toggle} onExpand={expand} />}
      </Loaded>
    </>
  );
}

function RanksTimeline(props: ViewProps & {
  data: TimelineRanksReply; query: Record<string, string | number | null>; open: Set<string>; onToggle: (rank: string) => void;
  onExpand: (ranks: number[]) => void;
}) {
  const { data, open } = props;
  const ranks = useMemo(() => typedRows(data.ranks), [data]);
  const byPid = useMemo(() => new Map(ranks.map((r) => [`rank ${r.rank}`, r])), [ranks]);
  const trackList = useMemo<TrackInfo[]>(() => typedRows(data.tracks).map((r) => ({
    track: r.track, kind: r.kind, process: r.process, thread: r.thread, pid: r.pid, tid: r.tid, lanes: r.lanes, events: r.events,
  })), [data]);
  const groups = useMemo(() => groupTracks(trackList), [trackList]);
  const keyRank = useMemo(() => new Map(groups.map((g) => [g.key, String(byPid.get(g.tracks[0].pid)?.rank ?? '')])), [groups, byPid]);
  const limit = useMemo(() => bounds(data.start_us, data.end_us), [data]);

  const [view, setView] = useUrlWindow(limit);
  const [plotWidth, setPlotWidth] = useState(0);
  // every rank's group shows its tracks, so the request names none (all of the ranks asked
  // for): its URL stays short whatever the number of ranks
  const slices = useTimelineData(props.query, view, plotWidth, '', ROUTES);
  const counters = useMemo(() => (slices.counters ? rankCounters(slices.counters as TimelineRankCountersReply['counters']) : null), [slices.counters]);
  // each expanded rank's counter rows, under its header; the names change only when the
  // series do (not on every pan), so the layout stays put
  const counterNames = (counters ?? []).map((c) => c.name).join('\u0000');
  const groupCounters = useMemo(() => {
    const keyOf = new Map(groups.map((g) => [g.tracks[0].pid, g.key]));
    const out = new Map<string, GroupCounter[]>();
    for (const series of (slices.counters ?? []) as TimelineRankCountersReply['counters']) {
      const key = keyOf.get(`rank ${series.rank}`);
      if (key === undefined) continue;
      out.set(key, [...(out.get(key) ?? []), { name: `Rank ${series.rank} · ${series.name}`, label: series.name }]);
    }
    return out;
  }, [groups, counterNames]);

  // Every group shows its tracks (a collapsed rank has only its summary track); the header
  // says whether the rank is expanded and which offset moved it.
  const shape = useMemo(() => {
    const base = layout(groups, [], NOTHING, groupCounters);
    const rows = base.rows.map((row) => {
      if (row.type !== 'header') return row;
      const rank = byPid.get(groups.find((g) => g.key === row.key)?.tracks[0].pid ?? '');
      if (!rank) return row;
      // the reference rank is aligned by definition, with no calls matched against itself
      const offset = !rank.aligned ? 'clock not aligned (no collective shared with the reference)'
        : rank.matched_calls === 0 && rank.offset_us === 0 ? 'reference clock' : `clock offset ${signedDuration(rank.offset_us)} (${rank.matched_calls} calls)`;
      return { ...row, collapsed: !open.has(String(rank.rank)), detail: `${offset} · shift ${signedDuration(rank.shift_us)}` };
    });
    return { ...base, rows };
  }, [groups, byPid, open, groupCounters]);

  // The selected event: a rank's own event id (ids are per trace), kept in the page only.
  const [picked, setPicked] = useState<{ rank: RankRow; event: number; where: TimelineEndpoint | null } | null>(null);
  useEffect(() => setPicked(null), [data]); // offsets or expanded ranks changed: re-pick
  const rankAt = useCallback((track: number) => ranks.find((r) => r.track === Math.floor(track / RANK_TRACK_STRIDE) * RANK_TRACK_STRIDE), [ranks]);
  const onSelect = useCallback((hit: SliceHit | null) => {
    const rank = hit && hit.event >= 0 && hit.track % RANK_TRACK_STRIDE !== 0 ? rankAt(hit.track) : undefined;
    setPicked(hit && rank ? { rank, event: hit.event, where: { event: hit.event, track: hit.track, lane: hit.lane, ts_us: hit.start, dur_us: hit.dur } } : null);
  }, [rankAt]);
  const rankBase = picked ? { run: props.run, worker: picked.rank.worker, span: props.span, event: picked.event } : null;
  const details = useApi<'timeline_event', TimelineEventReply>(rankBase ? 'timeline_event' : null, rankBase ?? {});
  const flows = useApi<'timeline_flows', TimelineFlowsReply>(rankBase ? 'timeline_flows' : null, rankBase ?? {});
  const known = details.status === 'ok' && picked && details.data.event === picked.event ? details.data : null;
  const selected = picked ? picked.where ?? (known ? onAxis(picked.rank, known) : null) : null;
  const arrows: TimelineFlow[] = picked && flows.status === 'ok' && flows.data.event === picked.event
    ? flows.data.flows.map((f) => ({ ...f, from: onAxis(picked.rank, f.from), to: onAxis(picked.rank, f.to) })) : [];
  // the picked rank's own tracks by their own ids, for the details' "Where"
  const ownTracks = useMemo(() => new Map(picked ? trackList.filter((t) => t.track > picked.rank.track && t.track < picked.rank.track + RANK_TRACK_STRIDE)
    .map((t) => [t.track - picked.rank.track - 1, t] as [number, TrackInfo]) : []), [trackList, picked]);
  const [reveal, setReveal] = useState(0);
  const found = useCallback((hit: RankSearchHit) => {
    const rank = ranks.find((r) => r.rank === hit.rank);
    if (!rank) return;
    setPicked({ rank, event: hit.event, where: hit });
    setView((v) => centreOn(v, hit.ts_us, hit.ts_us + hit.dur_us, limit));
    setReveal((n) => n + 1);
  }, [ranks, limit]);
  const search = useRankSearch({ query: props.query, open: open.size, onExpand: props.onExpand, onFound: found });
  const [range, setRange] = useUrlRange();
  const goTo = (e: TimelineEndpoint) => {
    if (!picked) return;
    const where = e.track < 0 ? null : onAxis(picked.rank, e);
    setPicked({ rank: picked.rank, event: e.event, where });
    if (where) setView((v) => centreOn(v, where.ts_us, where.ts_us + where.dur_us, limit));
  };
  // the Operator view of the picked rank's worker: a change of profile, so its selections go
  const openOperator = (name: string) =>
    setParams({ ...Object.fromEntries(PROFILE_SELECTIONS.map((n) => [n, null])), worker: picked?.rank.worker, view: 'operator', op_search: name });
  const operatorHref = (name: string) => {
    const url = new URL(window.location.href);
    PROFILE_SELECTIONS.forEach((n) => url.searchParams.delete(n));
    url.searchParams.set('worker', picked?.rank.worker ?? props.worker);
    url.searchParams.set('view', 'operator');
    url.searchParams.set('op_search', name);
    return url.href;
  };

  const onToggle = useCallback((key: string) => {
    const rank = keyRank.get(key);
    if (rank) props.onToggle(rank);
  }, [keyRank, props.onToggle]);

  return (
    <>
      <div class="hint trace-help">
        {ranks.length === 1 ? '1 rank' : `${ranks.length} ranks`} on one time axis, in µs from the reference rank's trace origin ({windowLabel(view)} shown). Click a rank's header to
        expand it into its own tracks (its profile loads) or collapse it to its {ranks[0]?.summary ?? 'busy'} summary. Wheel or <kbd>W</kbd>/<kbd>S</kbd>:
        zoom · drag or <kbd>A</kbd>/<kbd>D</kbd>: pan · click an event of an expanded rank: its details and flows · shift+drag: totals of a range
        per name over the expanded ranks. An expanded rank also shows its counters (utilization, queues, memory) in its group. Search and range totals read
        the expanded ranks only: a collapsed rank has only its summary loaded.
      </div>
      <div class="hint" data-testid="offset-vs-shift">
        A rank's header gives two numbers. Clock offset: {columnDoc('TimelineRanksTable', 'offset_us')}. Shift:{' '}
        {columnDoc('TimelineRanksTable', 'shift_us')}.
      </div>
      {search.bar}
      {slices.error ? <ErrorBox title="Cannot load this part of the timeline" reason={slices.error} /> : null}
      <div data-testid="trace-ranks" data-ranks={ranks.map((r) => r.rank).join(',')} data-open={[...open].join(',')}>
        <Timeline
          layout={shape}
          limit={limit}
          view={view}
          onView={setView}
          slices={slices.slices}
          counters={counters}
          steps={NO_STEPS}
          selected={selected}
          onSelect={onSelect}
          flows={arrows}
          range={range}
          onRange={setRange}
          onToggle={onToggle}
          reveal={reveal}
          onPlotWidth={setPlotWidth}
          requests={slices.requests}
        />
      </div>
      {search.matches}
      {range ? (
        <RankSummary query={props.query} range={range} total={trackList.length} open={open.size} onExpand={props.onExpand} onClear={() => setRange(null)} />
      ) : null}
      {picked ? (
        <div data-testid="trace-rank-selected" data-rank={String(picked.rank.rank)}>
          <div class="hint">Rank {picked.rank.rank} ({picked.rank.worker}): times below are on its own trace's clock, from its start.</div>
          <Details event={details} flows={flows} tracks={ownTracks} operatorHref={operatorHref} onOperatorLink={openOperator} onGoTo={goTo} />
        </div>
      ) : null}
      <Card title="Clock offsets applied">
        <DataTable
          id="trace-rank-offsets"
          schema="TimelineRanksTable"
          rows={ranks}
          csvColumns={data.ranks.columns}
          csvName={`${props.run}_${props.span}_rank_offsets.csv`}
          rowKey={(r) => String(r.rank)}
          columns={[
            { key: 'rank', label: 'Rank', numeric: true },
            { key: 'worker', label: 'Worker' },
            { key: 'offset_us', label: 'Clock offset', numeric: true, format: (v) => formatDuration(v) },
            { key: 'matched_calls', label: 'Calls matched', numeric: true },
            { key: 'aligned', label: 'Aligned', format: (v) => (v ? 'yes' : 'no') },
            { key: 'shift_us', label: 'Shift applied', numeric: true, format: (v) => formatDuration(v) },
            { key: 'start_us', label: 'First event', numeric: true, format: (v) => formatDuration(v) },
            { key: 'end_us', label: 'Last event end', numeric: true, format: (v) => formatDuration(v) },
          ]}
        />
      </Card>
    </>
  );
}
