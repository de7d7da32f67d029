// Wire types: the JSON the routes answer, as tb_plugin/openapi.yaml describes it. A reply is
// `ReplyOf<route>` (generated); the aliases below name parts of generated replies, and the
// interfaces left narrow a loosely described reply to what the page reads (`useApi<R, T>`
// checks each is one of the route's replies).
// Durations are microseconds (`_us`), sizes bytes (`_bytes`). Tables arrive as
// {columns, rows} and are turned into row objects once, by tables.rowsOf
// (or `tables.typedRows`, typed by the table's generated declaration).

import type { components } from './schema';
import type { Cell, ReplyOf, WireTableOf } from './tables';

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

/** The part of /info the page reads. */
export interface InfoReply {
  device_type: string;
}

/** A tab of the page: generated from the tabs declared beside the views (`schema.tab`). */
export type ViewName = components['schemas']['ViewName'];

export type Recommendation = components['schemas']['Recommendation'];

/** One import anomaly (tb_plugin/trace/anomalies.py): what the reader repaired or dropped. */
export type Anomaly = components['schemas']['Anomalies'][number];

export type OverviewReply = ReplyOf<'overview'>;

export type StackFrame = components['schemas']['StackFrame'];

export type OperatorStack = components['schemas']['OperatorStack'];

export type OperatorStacksReply = ReplyOf<'operator_stacks'>;

export interface TensorCoreShare {
  tensor_cores_us: number;
  other_us: number;
  tensor_cores_pct: number | null;
  /** The vendor's name for the units: "Tensor Cores" (NVIDIA) or "Matrix cores" (AMD). */
  unit: string;
}

export interface MemoryDevicesReply {
  devices: string[];
}

export interface MemoryPeaks {
  device: string;
  peak_allocated_bytes: number | null;
  peak_allocated_us: number | null;
  peak_reserved_bytes: number | null;
  total_memory_bytes: number | null;
}

export interface MemoryCurveReply {
  device: string;
  peaks: MemoryPeaks;
  curve: WireTableOf<'MemoryCurveTable'>;
}

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
export interface ErrorReply {
  error: string;
  reason: string;
  path?: string;
}

/** The 202 reply of a profile still being parsed. */
export interface LoadingReply {
  loading: true;
  path: string;
  elapsed_seconds?: number;
  /** queued for the loader; reading the file; parsing events; building tables; loaded, the
   * view waiting for others being computed. */
  stage?: 'queued' | 'reading' | 'parsing' | 'building' | 'computing';
  /** While reading, the fraction (0..1) of the file read; while parsing, of the JSON parsed. */
  fraction?: number | null;
  /** Views over several traces (distributed): how many are loaded, of how many. */
  ready?: number;
  total?: number;
}

/** What every view gets from the shell: the selected profile and the known runs. */
export interface ViewProps {
  run: string;
  worker: string;
  span: number;
  runs: RunInfo[];
}
