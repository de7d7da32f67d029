// What the ranks mode of the Trace view does over its expanded ranks, besides drawing them:
// search events by name (/timeline_rank_search: matches of every expanded rank in order of
// their start on the shared axis, a list to click through) and a range's totals per name
// (/timeline_rank_summary: over the ranks and per rank, each rank's range taken on its own
// clock by the server). Collapsed ranks have no events loaded: both say which ranks they
// left out and offer to expand them.

import type { VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { RankSearchHit, TimelineRankSearchReply, TimelineRankSummaryReply } from '../../api/types';
import { typedRows } from '../../api/tables';
import { useApi } from '../../api/useApi';
import type { Params } from '../../api/client';
import { formatDuration, formatNumber, plural } from '../../base/format';
import { useUrlParam } from '../../components/useUrlParam';
import { Card, Loaded } from '../../components/Status';
import { DataTable } from '../../components/table/DataTable';
import type { Range } from './draw';

/** At most this many ranks expanded at once (`MAX_EXPANDED` in views/rank_timeline.py). */
export const MAX_EXPANDED = 16;

/** "ranks 1, 3 and 4" / "rank 2". */
export function rankList(ranks: readonly number[]): string {
  if (ranks.length === 1) return `rank ${ranks[0]}`;
  const shown = ranks.length > 12 ? [...ranks.slice(0, 10).map(String), `${ranks.length - 10} more`] : ranks.map(String);
  return `ranks ${shown.slice(0, -1).join(', ')} and ${shown[shown.length - 1]}`;
}

/** The collapsed ranks that can still be expanded, given how many are open. */
export function expandable(left: readonly number[], open: number): number[] {
  return left.slice(0, Math.max(MAX_EXPANDED - open, 0));
}

/** "Ranks 1 and 3 are collapsed: not searched · expand them": what a tool over the expanded
 *  ranks left out, with a button expanding as many of them as may be open. */
function LeftOut({ left, open, what, onExpand }: { left: number[]; open: number; what: string; onExpand: (ranks: number[]) => void }) {
  if (!left.length) return null;
  const more = expandable(left, open);
  return (
    <span class="hint" data-testid="trace-ranks-left-out" data-ranks={left.join(',')}>
      {rankList(left).replace(/^r/, 'R')} {left.length === 1 ? 'is' : 'are'} collapsed (events not loaded): not {what}.{' '}
      {more.length ? (
        <button type="button" class="link-button" data-control="trace-expand-left-out" onClick={() => onExpand(more)}>
          {more.length === left.length ? `expand ${left.length === 1 ? 'it' : 'them'}` : `expand ${rankList(more)}`}
        </button>
      ) : `(at most ${MAX_EXPANDED} ranks expanded at once)`}
    </span>
  );
}

export interface RankSearchProps {
  query: Params;
  open: number;
  onExpand: (ranks: number[]) => void;
  onFound: (hit: RankSearchHit) => void;
}

/** Search over the expanded ranks: `bar`, the search box with ◀ ▶ to step through the matches
 *  (for above the timeline), and `matches`, the list of 50 from the current one and what was
 *  not searched (for below it); the query is the single-worker mode's `trace_q`. */
export function useRankSearch({ query, open, onExpand, onFound }: RankSearchProps): { bar: VNode; matches: VNode | null } {
  const [q, setQ] = useUrlParam('trace_q', '');
  const [text, setText] = useState(q);
  // where the list starts: the first match (null), or a step past its ends
  const [from, setFrom] = useState<{ after_rank: number; after_event: number; direction: 'next' | 'prev' } | null>(null);
  const [at, setAt] = useState(0);
  const goPending = useRef(false);
  const state = useApi<'timeline_rank_search', TimelineRankSearchReply>(q ? 'timeline_rank_search' : null, { ...query, q, ...(from ?? {}) });
  const reply = state.status === 'ok' ? state.data : null;
  // a new list (another query, step past its ends, or other ranks expanded) starts at its first match
  useEffect(() => {
    if (!reply) return;
    setAt(0);
    if (!goPending.current) return;
    goPending.current = false;
    if (reply.match) onFound(reply.match);
  }, [reply]);

  const submit = () => {
    const next = text.trim();
    if (!next) return;
    goPending.current = true;
    setFrom(null);
    setAt(0);
    if (next === q && !from && reply?.match) {
      goPending.current = false;
      onFound(reply.match);
    }
    setQ(next);
  };
  const step = (direction: 'next' | 'prev') => {
    if (!reply || !reply.results.length) return submit();
    const next = at + (direction === 'next' ? 1 : -1);
    if (next >= 0 && next < reply.results.length) {
      setAt(next);
      onFound(reply.results[next]);
      return;
    }
    // past the listed matches: ask from the first or last one listed
    const edge = direction === 'next' ? reply.results[reply.results.length - 1] : reply.results[0];
    goPending.current = true;
    setFrom({ after_rank: edge.rank, after_event: edge.event, direction });
  };
  const current = reply?.results[at];
  const searched = reply ? reply.ranks.map((r) => r.rank) : [];

  const bar = (
    <div class="toolbar trace-toolbar" data-testid="trace-rank-search">
      <form
        class="trace-search"
        onSubmit={(e) => {
          e.preventDefault();
          submit();
        }}
      >
        <input
          type="search"
          data-control="trace-search"
          placeholder="Search the expanded ranks' events by name"
          aria-label="Search the expanded ranks' events by name"
          value={text}
          onInput={(e) => setText((e.target as HTMLInputElement).value)}
        />
        <button type="submit" data-control="trace-search-go">Search</button>
        <button type="button" data-control="trace-prev" title="Previous match" onClick={() => step('prev')}>◀</button>
        <button type="button" data-control="trace-next" title="Next match" onClick={() => step('next')}>▶</button>
        <span
          class="hint"
          data-testid="trace-search-status"
          data-total={reply ? String(reply.total) : ''}
          data-match={current ? `${current.rank}:${current.event}` : ''}
        >
          {state.status === 'error' ? <span class="error">{state.error}</span>
            : !q ? '' : state.status === 'loading' ? 'searching…'
              : !searched.length ? 'no rank is expanded: nothing searched'
                : reply?.total ? `${formatNumber(reply.position + at + 1)} of ${formatNumber(reply.total)} on ${rankList(searched)}`
                  : `no match on ${rankList(searched)}`}
        </span>
      </form>
      {reply && q ? <LeftOut left={reply.not_searched} open={open} what="searched" onExpand={onExpand} /> : null}
    </div>
  );
  const matches = reply && q && reply.results.length ? (
    <Card title={`Matches of “${q}”`}>
      <DataTable
        id="trace-rank-matches"
        schema={null}
        rows={reply.results.map((r, i) => ({ ...r, at: i }))}
        csvName={`${String(query.run)}_${String(query.span)}_search.csv`}
        rowKey={(r) => `${r.rank}:${r.event}`}
        caption={reply.total > reply.results.length ? `${formatNumber(reply.results.length)} matches from match ${formatNumber(reply.position + 1)} on; ▶ past the last asks for the next ones` : undefined}
        columns={[
          { key: 'rank', label: 'Rank', numeric: true },
          {
            key: 'name',
            label: 'Name',
            format: (v, r) => (
              <button
                type="button"
                class="link-button"
                data-control="trace-rank-match"
                data-current={r.at === at ? 'true' : undefined}
                onClick={() => {
                  setAt(r.at);
                  onFound(reply.results[r.at]);
                }}
              >
                {r.at === at ? `▸ ${v}` : v}
              </button>
            ),
          },
          { key: 'ts_us', label: 'Start (shared axis)', numeric: true, format: (v) => formatDuration(v), title: 'On the reference rank’s clock, the offsets applied' },
          { key: 'dur_us', label: 'Duration', numeric: true, format: (v) => formatDuration(v) },
          { key: 'own_ts_us', label: 'Start (its own clock)', numeric: true, format: (v) => formatDuration(v), title: 'From the start of the rank’s own trace' },
        ]}
      />
    </Card>
  ) : null;
  return { bar, matches };
}

/** The totals of a shift+dragged range over the expanded ranks, combined and per rank. */
export function RankSummary({ query, range, total, open, onExpand, onClear }: {
  query: Params; range: Range; total: number; open: number; onExpand: (ranks: number[]) => void; onClear: () => void;
}) {
  const tracks = range.tracks.length && range.tracks.length < total ? range.tracks.join(',') : null;
  const state = useApi<'timeline_rank_summary', TimelineRankSummaryReply>('timeline_rank_summary', { ...query, start_us: range.start, end_us: range.end, tracks });
  const csv = `${String(query.run)}_${String(query.span)}_ranks_range`;
  return (
    <Card title={`Range ${formatDuration(range.start)} – ${formatDuration(range.end)} (${formatDuration(range.end - range.start)}) on the shared axis`}>
      <div class="hint" data-testid="trace-range" data-start-us={String(range.start)} data-end-us={String(range.end)} data-tracks={tracks ?? ''}>
        {tracks ? `${plural(range.tracks.length, 'track')} of ${total}` : 'all tracks'}; each rank’s range taken on its own clock (the offsets applied) ·{' '}
        <button type="button" class="link-button" data-control="trace-clear-range" onClick={onClear}>clear</button>
      </div>
      <Loaded state={state}>
        {(data) => (
          <>
            <div class="hint" data-testid="trace-range-ranks" data-ranks={data.ranks.join(',')}>
              {data.ranks.length ? `Summed over ${rankList(data.ranks)}.` : 'No expanded rank in the range: nothing summed. Expand a rank (click its header) to read its events.'}{' '}
              <LeftOut left={data.not_summed} open={open} what="summed" onExpand={onExpand} />
            </div>
            <h3>Over the ranks</h3>
            <DataTable
              id="trace-rank-summary"
              schema="TimelineRankSummaryTable"
              rows={typedRows(data.combined)}
              csvColumns={data.combined.columns}
              csvName={`${csv}.csv`}
              searches={[{ label: 'Search names', keys: ['name', 'kind'] }]}
              defaultSort={{ key: 'total_us', dir: 'desc' }}
              rowKey={(r) => `${r.name}|${r.kind}`}
              columns={[
                { key: 'name', label: 'Name' },
                { key: 'kind', label: 'Kind' },
                { key: 'count', label: 'Count', numeric: true, format: (v) => formatNumber(v) },
                { key: 'total_us', label: 'Total in range', numeric: true, format: (v) => formatDuration(v) },
                { key: 'ranks', label: 'Ranks', numeric: true },
                { key: 'min_rank_us', label: 'Least on a rank', numeric: true, format: (v, r) => `${formatDuration(v)} (rank ${r.min_rank})` },
                { key: 'max_rank_us', label: 'Most on a rank', numeric: true, format: (v, r) => `${formatDuration(v)} (rank ${r.max_rank})` },
              ]}
            />
            <h3>Per rank</h3>
            <DataTable
              id="trace-rank-summary-by-rank"
              schema="TimelineRankSummaryByRankTable"
              rows={typedRows(data.by_rank)}
              csvColumns={data.by_rank.columns}
              csvName={`${csv}_by_rank.csv`}
              searches={[{ label: 'Search names', keys: ['name', 'kind'] }, { label: 'Rank', keys: ['rank'] }]}
              defaultSort={{ key: 'total_us', dir: 'desc' }}
              rowKey={(r) => `${r.rank}|${r.name}|${r.kind}`}
              columns={[
                { key: 'rank', label: 'Rank', numeric: true },
                { key: 'name', label: 'Name' },
                { key: 'kind', label: 'Kind' },
                { key: 'count', label: 'Count', numeric: true, format: (v) => formatNumber(v) },
                { key: 'total_us', label: 'Total in range', numeric: true, format: (v) => formatDuration(v) },
              ]}
            />
          </>
        )}
      </Loaded>
    </Card>
  );
}
