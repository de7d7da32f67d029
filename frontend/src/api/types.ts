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

export interface Recommendation {
  id: string;
  severity: 'warning' | 'info';
  text: string;
  /** What was tested: the measured value against its threshold, in words. */
  condition: string;
  /** Upper bound of the time per step the advice could save (µs, mean over `steps`, never
   *  above the mean step); null where no bound can be defended. */
  saving_us: number | null;
  /** Where there is no saving: the measured time per step of what the item is about (µs). */
  measured_us: number | null;
  /** How many steps the per-step figures are means over. */
  steps: number;
  numbers: Record<string, number | boolean>;
  /** The view (its page-URL parameters and the panel of it) showing the events behind the
   *  numbers, and the kernel names the text quotes. */
  evidence?: { view?: string; params?: Record<string, string | number>; panel?: string; kernels?: string[] };
  /** The PyTorch documentation of the fix; "" when none. */
  docs: string;
}

/** One import anomaly (tb_plugin/trace/anomalies.py): what the reader repaired or dropped. */
export interface Anomaly {
  key: string;
  severity: 'data_loss' | 'info';
  meaning: string;
  /** How many times; for `tolerant_parse`, why the fast reader refused the file. */
  value: number | string;
}

export interface OverviewReply {
  environment: Record<string, unknown>;
  steps: WireTableOf<'StepBreakdownTable'>;
  step_mean: Record<string, number>;
  /** The mean step by category: category, mean_us, share_pct. */
  step_summary: WireTableOf<'StepSummaryTable'>;
  gpu_summary: WireTableOf<'GpuSummaryTable'>;
  recommendations: Recommendation[];
  anomalies: Anomaly[];
}

export interface StackFrame {
  file: string | null;
  /** 1-based. */
  line: number | null;
  function: string;
  text: string;
  /** The file as an absolute path on the TensorBoard machine, where exactly one matches. */
  path: string | null;
}

export interface OperatorStack {
  calls: number;
  host_self_us: number;
  host_total_us: number;
  device_self_us: number;
  device_total_us: number;
  frames: StackFrame[];
}

export interface OperatorStacksReply {
  name: string;
  input_shape: string | null;
  stacks: OperatorStack[];
}

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

export interface FlameNode {
  name: string;
  value: number;
  children: FlameNode[];
  /** Modules below this node that the server folded into it (the graph's depth is bounded). */
  folded?: number;
}

/** /timeline_tracks: tracks (a table), the trace's span and steps, µs from the trace start. */
export interface TimelineTracksReply {
  tracks: WireTableOf<'TimelineTracksTable'>;
  start_us: number;
  end_us: number;
  origin_us: number;
  steps: WireTableOf<'TimelineStepsTable'>;
  kinds: string[];
}

/** /timeline_ranks: the ranks on one time axis (offsets and shifts applied), their tracks
 * (a summary track per rank, an expanded rank's own tracks), the axis' span. */
export type TimelineRanksReply = ReplyOf<'timeline_ranks'>;

/** /timeline_slices: columnar; `name` and `kind` index `names` and `kinds` (kind -1 and
 * event -1 for a merged block of `count` events shorter than the resolution). */
export interface TimelineSlicesReply {
  track: number[];
  lane: number[];
  start_us: number[];
  dur_us: number[];
  name: number[];
  count: number[];
  busy_us: number[];
  event: number[];
  kind: number[];
  names: string[];
  kinds: string[];
}

export interface CounterSeries {
  name: string;
  unit: string;
  time_us: number[];
  value: (number | null)[];
  max: (number | null)[];
  /** a device's hardware counter: the pid of that device's streams; '' (or absent) otherwise */
  pid?: string;
}

export interface TimelineCountersReply {
  counters: CounterSeries[];
}

/** A slice as the timeline routes name it: id, place and time. */
export type TimelineEndpoint = {
  event: number;
  track: number;
  lane: number;
  ts_us: number;
  dur_us: number;
};

export interface TimelineEventReply extends TimelineEndpoint {
  name: string;
  kind: string;
  source: string;
  row: number;
  start_us_absolute: number;
  fields: Record<string, string | number | boolean | null>;
  operator?: { row: number; name: string; input_shape: string; event: number };
  call_stack?: StackFrame[];
}

export type TimelineFlow = {
  kind: string;
  from: TimelineEndpoint;
  to: TimelineEndpoint;
};

export interface TimelineFlowsReply {
  event: number;
  flows: TimelineFlow[];
}

export interface TimelineSearchReply {
  total: number;
  /** Rank of `match` among all matches, ordered by (start, event id). */
  position: number;
  match: (TimelineEndpoint & { name: string }) | null;
  results: (TimelineEndpoint & { name: string })[];
}

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
