// Wire types: the JSON the routes answer, as tb_plugin/openapi.yaml describes it. A reply is
// `ReplyOf<route>` (generated); the aliases below name generated replies and parts of them
// (no wire type is written here by hand: where the page needs a narrower type, the route's
// OpenAPI description is made narrower). `WireTable` is any table's {columns, rows}.
// Durations are microseconds (`_us`), sizes bytes (`_bytes`). Tables arrive as
// {columns, rows} and are turned into row objects once, by tables.rowsOf
// (or `tables.typedRows`, typed by the table's generated declaration).

import type { components } from './schema';
import type { Cell, ReplyOf } from './tables';

export interface WireTable {
  columns: string[];
  rows: Cell[][];
}

export type RunError = RunInfo['errors'][number];

export type SnapshotFile = RunInfo['snapshots'][number];

export type RunInfo = RunsReply['runs'][number];

export type ScanSkip = RunsReply['scan_errors'][number];

export type RunsReply = ReplyOf<'runs'>;

export type SpansReply = ReplyOf<'spans'>;

export type InfoReply = ReplyOf<'info'>;

/** A tab of the page: generated from the tabs declared beside the views (`schema.tab`). */
export type ViewName = components['schemas']['ViewName'];

export type Recommendation = components['schemas']['Recommendation'];

/** One import anomaly (tb_plugin/trace/anomalies.py): what the reader repaired or dropped. */
export type Anomaly = components['schemas']['Anomalies'][number];

export type OverviewReply = ReplyOf<'overview'>;

export type StackFrame = components['schemas']['StackFrame'];

export type OperatorStack = components['schemas']['OperatorStack'];

export type OperatorStacksReply = ReplyOf<'operator_stacks'>;

export type TensorCoreShare = ReplyOf<'kernel_tensor_cores'>;

export type MemoryDevicesReply = ReplyOf<'memory_devices'>;

export type MemoryPeaks = MemoryCurveReply['peaks'];

export type MemoryCurveReply = ReplyOf<'memory_curve'>;

export type FlameNode = components['schemas']['FlameNode'];

/** /timeline_tracks: tracks (a table), the trace's span and steps, µs from the trace start. */
export type TimelineTracksReply = ReplyOf<'timeline_tracks'>;

/** /timeline_ranks: the ranks on one time axis (offsets and shifts applied), their tracks
 * (a summary track per rank, an expanded rank's own tracks), the axis' span. */
export type TimelineRanksReply = ReplyOf<'timeline_ranks'>;

/** /timeline_slices: columnar; `name` and `kind` index `names` and `kinds` (kind -1 and
 * event -1 for a merged block of `count` events shorter than the resolution). */
export type TimelineSlicesReply = ReplyOf<'timeline_slices'>;

export type CounterSeries = components['schemas']['CounterSeries'];

export type TimelineCountersReply = ReplyOf<'timeline_counters'>;

/** A slice as the timeline routes name it: id, place and time. */
export type TimelineEndpoint = components['schemas']['TimelineEndpoint'];

export type TimelineEventReply = ReplyOf<'timeline_event'>;

export type TimelineFlow = components['schemas']['TimelineFlow'];

export type TimelineFlowsReply = ReplyOf<'timeline_flows'>;

export type TimelineSearchReply = ReplyOf<'timeline_search'>;

/** A match of /timeline_rank_search: one rank's own event (`event` its id in that rank's
 * trace) placed on the shared axis (`track`, `ts_us`), with its start on its own clock. */
export type RankSearchHit = components['schemas']['TimelineRankSearchHit'];

/** /timeline_rank_search: as /timeline_search over the expanded ranks, plus the ranks searched
 * (with their matches) and those not searched (collapsed: their events are not loaded). */
export type TimelineRankSearchReply = ReplyOf<'timeline_rank_search'>;

/** /timeline_rank_summary: a range's totals per name over the expanded ranks and per rank (the
 * whole object: the route answers one of its tables alone with table=). */
export type TimelineRankSummaryReply = Extract<ReplyOf<'timeline_rank_summary'>, { not_summed: unknown }>;

/** /timeline_rank_counters: each expanded rank's counter series, on the shared axis. */
export type TimelineRankCountersReply = ReplyOf<'timeline_rank_counters'>;

/** A 4xx/5xx reply body. */
export type ErrorReply = components['responses']['Error']['content']['application/json'];

/** The 202 reply of a profile still being parsed. */
export type LoadingReply = components['responses']['Loading']['content']['application/json'];

/** What every view gets from the shell: the selected profile and the known runs. */
export interface ViewProps {
  run: string;
  worker: string;
  span: number;
  runs: RunInfo[];
}
