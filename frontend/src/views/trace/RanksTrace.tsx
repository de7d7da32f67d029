// Several ranks of one span on one time axis (the Trace view's ranks mode): one collapsible
// group of tracks per rank, headed by the rank, its worker and the clock offset applied. A
// collapsed rank draws one summary track (its busy time, from a small per-rank summary the
// server keeps); expanding it loads that rank's profile and draws its own tracks. Times are on
// the reference rank's axis (µs from its first event), each rank moved by the server's
// shift_us (origin difference plus clock offset; offset 0 with clock alignment off). The same
// canvas timeline as one trace: zoom and pan alike. URL state: trace_ranks (all or a list),
// trace_rank_open (the ranks expanded), align_clocks (shared with the Job view), the window.

import { useCallback, useEffect, useMemo, useState } from 'preact/hooks';
import type { TimelineRanksReply, ViewProps } from '../../api/types';
import { typedRows } from '../../api/tables';
import { useApi } from '../../api/useApi';
import { formatDuration } from '../../base/format';
import { setParams } from '../../base/url';
import { Card, ErrorBox, Loaded } from '../../components/Status';
import { DataTable } from '../../components/table/DataTable';
import { useUrlParam } from '../../components/useUrlParam';
import { useTimelineData, type TimelineRoutes } from './data';
import { bounds, clampWindow, groupTracks, layout, windowLabel, type TrackInfo, type Window } from './logic';
import { Timeline } from './Timeline';

const ROUTES: TimelineRoutes = { slices: 'timeline_rank_slices', counters: null };
const NO_STEPS: never[] = [];
const NOTHING = new Set<string>();

function num(text: string): number | null {
  if (text === '') return null;
  const v = Number(text);
  return Number.isFinite(v) ? v : null;
}

const round = (v: number) => Math.round(v * 1000) / 1000;

/** "+1.2 ms" / "-300 µs": a signed duration. */
export function signedDuration(us: number): string {
  return `${us < 0 ? '−' : '+'}${formatDuration(Math.abs(us))}`;
}

export function RanksTrace(props: ViewProps & { ranks: string }) {
  const [align, setAlign] = useUrlParam('align_clocks', 'true');
  const [openParam, setOpenParam] = useUrlParam('trace_rank_open', '');
  const query = { run: props.run, span: props.span, ranks: props.ranks, expanded: openParam || null, align_clocks: align };
  const state = useApi<TimelineRanksReply>('timeline_ranks', query);
  const open = useMemo(() => new Set(openParam.split(',').filter((r) => r !== '')), [openParam]);
  const toggle = useCallback((rank: string) => {
    const next = new Set(open);
    if (next.has(rank)) next.delete(rank);
    else next.add(rank);
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
        {(data) => <RanksTimeline {...props} data={data} query={query} open={open} onToggle={toggle} />}
      </Loaded>
    </>
  );
}

function RanksTimeline(props: ViewProps & { data: TimelineRanksReply; query: Record<string, string | number | null>; open: Set<string>; onToggle: (rank: string) => void }) {
  const { data, open } = props;
  const ranks = useMemo(() => typedRows(data.ranks), [data]);
  const byPid = useMemo(() => new Map(ranks.map((r) => [`rank ${r.rank}`, r])), [ranks]);
  const trackList = useMemo<TrackInfo[]>(() => typedRows(data.tracks).map((r) => ({
    track: r.track, kind: r.kind, process: r.process, thread: r.thread, pid: r.pid, lanes: r.lanes, events: r.events,
  })), [data]);
  const groups = useMemo(() => groupTracks(trackList), [trackList]);
  const keyRank = useMemo(() => new Map(groups.map((g) => [g.key, String(byPid.get(g.tracks[0].pid)?.rank ?? '')])), [groups, byPid]);
  const limit = useMemo(() => bounds(data.start_us, data.end_us), [data]);

  const [startParam] = useUrlParam('trace_start_us', '');
  const [endParam] = useUrlParam('trace_end_us', '');
  const [view, setViewState] = useState<Window>(() => {
    const s = num(startParam);
    const e = num(endParam);
    return s !== null && e !== null && e > s ? clampWindow({ start: s, end: e }, limit) : clampWindow(limit, limit);
  });
  const setView = useCallback((next: Window) => setViewState(clampWindow(next, limit)), [limit]);
  useEffect(() => {
    const timer = setTimeout(() => setParams({ trace_start_us: round(view.start), trace_end_us: round(view.end) }), 250);
    return () => clearTimeout(timer);
  }, [view]);

  // Every group shows its tracks (a collapsed rank has only its summary track); the header
  // says whether the rank is expanded and which offset moved it.
  const shape = useMemo(() => {
    const base = layout(groups, [], NOTHING);
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
  }, [groups, byPid, open]);

  const [plotWidth, setPlotWidth] = useState(0);
  // every rank's group shows its tracks, so the request names none (all of the ranks asked
  // for): its URL stays short whatever the number of ranks
  const slices = useTimelineData(props.query, view, plotWidth, '', ROUTES);
  const onToggle = useCallback((key: string) => {
    const rank = keyRank.get(key);
    if (rank) props.onToggle(rank);
  }, [keyRank, props.onToggle]);

  return (
    <>
      <div class="hint trace-help">
        {ranks.length} ranks on one time axis, in µs from the reference rank's trace origin ({windowLabel(view)} shown). Click a rank's header to
        expand it into its own tracks (its profile loads) or collapse it to its {ranks[0]?.summary ?? 'busy'} summary. Wheel or <kbd>W</kbd>/<kbd>S</kbd>:
        zoom · drag or <kbd>A</kbd>/<kbd>D</kbd>: pan. For one rank's event details, search and flows, pick "This worker".
      </div>
      {slices.error ? <ErrorBox title="Cannot load this part of the timeline" reason={slices.error} /> : null}
      <div data-testid="trace-ranks" data-ranks={ranks.map((r) => r.rank).join(',')} data-open={[...open].join(',')}>
        <Timeline
          layout={shape}
          limit={limit}
          view={view}
          onView={setView}
          slices={slices.slices}
          counters={null}
          steps={NO_STEPS}
          selected={null}
          onSelect={() => undefined}
          flows={[]}
          range={null}
          onRange={() => undefined}
          onToggle={onToggle}
          reveal={0}
          onPlotWidth={setPlotWidth}
          requests={slices.requests}
        />
      </div>
      <Card title="Clock offsets applied">
        <DataTable
          id="trace-rank-offsets"
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
