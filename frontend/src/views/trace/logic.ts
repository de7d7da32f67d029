// The trace view's arithmetic, without DOM: the visible window and its zoom/pan steps, ruler
// ticks in µs/ms/s, the vertical layout of process groups, tracks, lanes and counters, slice
// colours and hit testing. Timeline.tsx draws what these return; logic.test.ts checks them.

import type { CounterSeries, TimelineSlicesReply } from '../../api/types';
import { plural } from '../../base/format';

/** A time window in µs from the trace start (the API's time base). */
export interface Window {
  start: number;
  end: number;
}

/** Smallest window one can zoom into, in µs. */
export const MIN_WIDTH_US = 0.5;

/** The trace's span widened by a margin, so its first and last events are not on the edge. */
export function bounds(start: number, end: number): Window {
  const width = Math.max(end - start, MIN_WIDTH_US);
  return { start: start - width * 0.02, end: end + width * 0.02 };
}

/** `view` moved/narrowed into `limit`, at least MIN_WIDTH_US wide. */
export function clampWindow(view: Window, limit: Window): Window {
  const full = limit.end - limit.start;
  let width = Math.min(Math.max(view.end - view.start, MIN_WIDTH_US), full);
  if (!Number.isFinite(width) || width <= 0) width = full;
  let start = Number.isFinite(view.start) ? view.start : limit.start;
  start = Math.min(Math.max(start, limit.start), limit.end - width);
  return { start, end: start + width };
}

/** Zoom by `factor` (> 1 zooms in) keeping the time under `anchor` (0..1 across) in place. */
export function zoomAt(view: Window, factor: number, anchor: number, limit: Window): Window {
  const a = Math.min(Math.max(anchor, 0), 1);
  const width = view.end - view.start;
  const at = view.start + a * width;
  const next = Math.max(width / factor, MIN_WIDTH_US);
  return clampWindow({ start: at - a * next, end: at - a * next + next }, limit);
}

/** Move by `fraction` of the window's width (positive: later). */
export function panBy(view: Window, fraction: number, limit: Window): Window {
  const shift = (view.end - view.start) * fraction;
  return clampWindow({ start: view.start + shift, end: view.end + shift }, limit);
}

/** The window that frames a step: its span with a margin of 3% on each side. */
export function stepWindow(step: { start_us: number; end_us: number }): Window {
  const pad = (step.end_us - step.start_us) * 0.03;
  return { start: step.start_us - pad, end: step.end_us + pad };
}

/** A window of the same width centred on [t0, t1], widened when that does not fit. */
export function centreOn(view: Window, t0: number, t1: number, limit: Window): Window {
  let width = view.end - view.start;
  if (t1 - t0 > width * 0.8) width = (t1 - t0) / 0.6;
  const mid = (t0 + t1) / 2;
  return clampWindow({ start: mid - width / 2, end: mid + width / 2 }, limit);
}

// ----------------------------------------------------------------------------- ruler

export interface Ticks {
  step: number;
  values: number[];
  unit: 's' | 'ms' | 'µs';
  decimals: number;
}

/** Tick positions 1, 2 or 5 x 10^k µs apart, at least `minSpacingPx` pixels apart. */
export function ticks(view: Window, widthPx: number, minSpacingPx = 90): Ticks {
  const width = view.end - view.start;
  const raw = (width * minSpacingPx) / Math.max(widthPx, 1);
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw * (1 - 1e-9)) ?? 10 * power;
  const values: number[] = [];
  const first = Math.ceil(view.start / step);
  for (let i = first; i * step <= view.end && values.length < 1000; i += 1) values.push(i * step);
  const unit = step >= 1e5 ? 's' : step >= 100 ? 'ms' : 'µs';
  const scale = unit === 's' ? 1e6 : unit === 'ms' ? 1e3 : 1;
  const decimals = Math.max(0, Math.ceil(-Math.log10(step / scale) - 1e-9));
  return { step, values, unit, decimals };
}

/** A tick's label: "1.5 s", "163.8 ms", "163,922 µs". */
export function tickLabel(t: number, spec: Pick<Ticks, 'unit' | 'decimals'>): string {
  const scale = spec.unit === 's' ? 1e6 : spec.unit === 'ms' ? 1e3 : 1;
  const value = t / scale;
  const text = Math.abs(value) < 10 ** -(spec.decimals + 1) ? (0).toFixed(spec.decimals) : value.toFixed(spec.decimals);
  const [whole, fraction] = text.split('.');
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${grouped}${fraction !== undefined ? `.${fraction}` : ''} ${spec.unit}`;
}

/** "16,551.52 ms – 16,553.37 ms": the window's ends with the precision its width needs. */
export function windowLabel(view: Window): string {
  const coarse = ticks(view, 20, 1);
  const spec = { unit: coarse.unit, decimals: coarse.decimals + 1 };
  return `${tickLabel(view.start, spec)} – ${tickLabel(view.end, spec)}`;
}

// ----------------------------------------------------------------------------- layout

export interface TrackInfo {
  track: number;
  kind: string;
  process: string;
  thread: string;
  pid: string;
  /** The thread's (or stream's) tid as the trace writes it. */
  tid: string;
  lanes: number;
  events: number;
}

/** The collapse key of one track (a group's is its `groupKey`). */
export function trackKey(track: Pick<TrackInfo, 'track'>): string {
  return `track:${track.track}`;
}

/** Python-frame tracks of threads that have nothing else on the timeline (no op of their
 *  own): background threads of torch 2.x (`threading._bootstrap`, an Inductor compile
 *  worker) whose idle frames stack a dozen lanes above the threads that work. They start
 *  collapsed, as Perfetto starts idle threads' tracks folded. */
export function idlePythonTracks(tracks: readonly TrackInfo[]): TrackInfo[] {
  const working = new Set(tracks.filter((t) => t.kind === 'thread').map((t) => `${t.pid}|${t.tid}`));
  return tracks.filter((t) => t.kind === 'python' && !working.has(`${t.pid}|${t.tid}`));
}

export interface ProcessGroup {
  key: string;
  label: string;
  tracks: TrackInfo[];
}

/** The process group a track belongs to (its collapse key). */
export function groupKey(track: TrackInfo): string {
  return `${track.pid}\u0000${track.process}`;
}

/** Tracks grouped by process, in the server's order (which follows the trace's metadata). */
export function groupTracks(tracks: TrackInfo[]): ProcessGroup[] {
  const groups: ProcessGroup[] = [];
  const byKey = new Map<string, ProcessGroup>();
  for (const track of tracks) {
    const key = groupKey(track);
    let group = byKey.get(key);
    if (!group) {
      group = { key, label: track.process, tracks: [] };
      byKey.set(key, group);
      groups.push(group);
    }
    group.tracks.push(track);
  }
  // Two processes with one display name: tell them apart by pid.
  const labels = new Map<string, number>();
  groups.forEach((g) => labels.set(g.label, (labels.get(g.label) ?? 0) + 1));
  groups.forEach((g) => {
    if ((labels.get(g.label) ?? 0) > 1) g.label = `${g.label} [pid ${g.tracks[0].pid}]`;
  });
  return groups;
}

export const LANE_PX = 18;
export const HEADER_PX = 20;
export const COUNTER_PX = 34;
export const TRACK_GAP_PX = 4;

export type Row =
  | { type: 'header'; y: number; h: number; key: string; label: string; collapsed: boolean; detail: string }
  | { type: 'track'; y: number; h: number; track: TrackInfo }
  | { type: 'counter'; y: number; h: number; name: string; label: string };

export interface Layout {
  rows: Row[];
  height: number;
  /** Top of each visible track (content coordinates); collapsed tracks are absent. */
  trackTop: Map<number, number>;
  /** Tracks drawn (in expanded processes), in order. */
  visibleTracks: number[];
}

export const COUNTERS_KEY = '\u0000counters';

/** A counter row inside a process group: `name` matches its series, `label` is shown. */
export interface GroupCounter {
  name: string;
  label: string;
}

const NO_GROUP_COUNTERS: ReadonlyMap<string, GroupCounter[]> = new Map();

/** Rows top to bottom: the counters group, then each process (a header, then the counters of
 *  `groupCounters` under its key, then its tracks). */
export function layout(groups: ProcessGroup[], counters: string[], collapsed: ReadonlySet<string>,
  groupCounters: ReadonlyMap<string, GroupCounter[]> = NO_GROUP_COUNTERS): Layout {
  const rows: Row[] = [];
  const trackTop = new Map<number, number>();
  const visibleTracks: number[] = [];
  let y = 0;
  if (counters.length) {
    const closed = collapsed.has(COUNTERS_KEY);
    rows.push({ type: 'header', y, h: HEADER_PX, key: COUNTERS_KEY, label: 'Counters', collapsed: closed, detail: `${counters.length} series` });
    y += HEADER_PX;
    if (!closed) {
      counters.forEach((name) => {
        rows.push({ type: 'counter', y, h: COUNTER_PX, name, label: name });
        y += COUNTER_PX;
      });
    }
  }
  for (const group of groups) {
    const closed = collapsed.has(group.key);
    const events = group.tracks.reduce((n, t) => n + t.events, 0);
    rows.push({ type: 'header', y, h: HEADER_PX, key: group.key, label: group.label, collapsed: closed, detail: `${plural(group.tracks.length, 'track')} · ${plural(events, 'event')}` });
    y += HEADER_PX;
    if (closed) continue;
    for (const counter of groupCounters.get(group.key) ?? []) {
      rows.push({ type: 'counter', y, h: COUNTER_PX, ...counter });
      y += COUNTER_PX;
    }
    for (const track of group.tracks) {
      if (collapsed.has(trackKey(track))) {
        // one header line, a click opens it; nothing fetched or drawn for it meanwhile
        rows.push({ type: 'header', y, h: HEADER_PX, key: trackKey(track), label: track.thread, collapsed: true, detail: `${plural(track.lanes, 'level')} · ${plural(track.events, 'event')}` });
        y += HEADER_PX;
        continue;
      }
      const h = Math.max(track.lanes, 1) * LANE_PX + TRACK_GAP_PX;
      rows.push({ type: 'track', y, h, track });
      trackTop.set(track.track, y);
      visibleTracks.push(track.track);
      y += h;
    }
  }
  return { rows, height: y, trackTop, visibleTracks };
}

/** Where each counter series is drawn: a device's hardware counter (its `pid` that of the
 *  device's streams) in that device's process group, under the group's header; every other
 *  series (and one whose device has no group shown) in the Counters group at the top. */
export function placeCounters(series: readonly CounterSeries[], groups: readonly ProcessGroup[]): { top: string[]; byGroup: Map<string, GroupCounter[]> } {
  const keyOf = new Map(groups.map((g) => [g.tracks[0]?.pid, g.key]));
  const top: string[] = [];
  const byGroup = new Map<string, GroupCounter[]>();
  for (const one of series) {
    const key = one.pid ? keyOf.get(one.pid) : undefined;
    if (key === undefined) top.push(one.name);
    else byGroup.set(key, [...(byGroup.get(key) ?? []), { name: one.name, label: one.name }]);
  }
  return { top, byGroup };
}

/** The series a counter row draws, matched by name: counter replies and the layout are
 * updated one after the other, so positions may disagree for a frame; undefined then. */
export function seriesOf(counters: readonly CounterSeries[] | null, row: { name: string }): CounterSeries | undefined {
  return counters?.find((series) => series.name === row.name);
}

/** The row at content height `y`, if any. */
export function rowAt(rows: Row[], y: number): Row | null {
  let lo = 0;
  let hi = rows.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const row = rows[mid];
    if (y < row.y) hi = mid - 1;
    else if (y >= row.y + row.h) lo = mid + 1;
    else return row;
  }
  return null;
}

/** Tracks whose rows the content-height range [y0, y1] touches. */
export function tracksBetween(rows: Row[], y0: number, y1: number): number[] {
  const lo = Math.min(y0, y1);
  const hi = Math.max(y0, y1);
  return rows.filter((r): r is Extract<Row, { type: 'track' }> => r.type === 'track' && r.y < hi && r.y + r.h > lo).map((r) => r.track.track);
}

// ----------------------------------------------------------------------------- slices

/** One reply of /timeline_slices, with the rows of each (track, lane) found quickly. */
export interface SliceData {
  reply: TimelineSlicesReply;
  /** "track:lane" -> indices into the reply's columns, sorted by start. */
  groups: Map<string, number[]>;
}

export function indexSlices(reply: TimelineSlicesReply): SliceData {
  const groups = new Map<string, number[]>();
  for (let i = 0; i < reply.track.length; i += 1) {
    const key = `${reply.track[i]}:${reply.lane[i]}`;
    let list = groups.get(key);
    if (!list) {
      list = [];
      groups.set(key, list);
    }
    list.push(i);
  }
  for (const list of groups.values()) list.sort((a, b) => reply.start_us[a] - reply.start_us[b]);
  return { reply, groups };
}

/** The slice of (track, lane) under time `t`, or the nearest within `slackUs`; -1 if none. */
export function hitSlice(data: SliceData, track: number, lane: number, t: number, slackUs: number): number {
  const list = data.groups.get(`${track}:${lane}`);
  if (!list) return -1;
  const { start_us: start, dur_us: dur } = data.reply;
  let best = -1;
  let bestGap = Infinity;
  for (const i of list) {
    if (start[i] - slackUs > t) break;
    const gap = t < start[i] ? start[i] - t : t > start[i] + dur[i] ? t - start[i] - dur[i] : 0;
    if (gap <= slackUs && (gap < bestGap || (gap === bestGap && dur[i] < dur[best]))) {
      best = i;
      bestGap = gap;
    }
  }
  return best;
}

// ----------------------------------------------------------------------------- colours

const LIGHT = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#8cd17d',
  '#86bcb6', '#f1ce63', '#a0cbe8', '#ffbe7d', '#d4a6c8', '#79706e', '#d37295', '#b6992d', '#499894', '#fabfd2'];
const DARK = ['#5b8fc7', '#f59e42', '#e8696b', '#7fc4bf', '#6bb560', '#d9b93b', '#bd8ab0', '#f58c98', '#b08b73', '#7cc46d',
  '#6fa8a2', '#d9b54f', '#7eaed1', '#e9a663', '#c194b6', '#938a88', '#c9668a', '#a38a2a', '#4f9e9a', '#e3a3b8'];

/** FNV-1a hash of a string, for stable colours by name. */
export function hashName(name: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i += 1) {
    h ^= name.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** A slice's fill colour: the same name always gets the same colour. */
export function nameColour(name: string, dark: boolean): string {
  const palette = dark ? DARK : LIGHT;
  return palette[hashName(name) % palette.length];
}

/** Black or white text, whichever reads better on `hex`. */
export function textOn(hex: string): string {
  const n = parseInt(hex.slice(1), 16);
  const r = (n >> 16) & 255;
  const g = (n >> 8) & 255;
  const b = n & 255;
  return 0.299 * r + 0.587 * g + 0.114 * b > 150 ? '#1b1b1b' : '#ffffff';
}

/** `text` cut to `maxPx` (at `charPx` per character), with an ellipsis; '' if nothing fits. */
export function fitText(text: string, maxPx: number, charPx: number): string {
  const room = Math.floor(maxPx / charPx);
  if (room < 3) return '';
  if (text.length <= room) return text;
  return `${text.slice(0, room - 1)}…`;
}

// ----------------------------------------------------------------------------- critical path

/** One segment of a step's critical path as /timeline_critical_path gives it. */
export interface PathSegment {
  category: string;
  start: number;
  end: number;
  dur: number;
  name: string;
  operator: string;
  /** The timeline track it lies on; -1 when the timeline has none. */
  track: number;
}

/** The consecutive segments that change track, as [from, to] indices: where the path goes
 *  from one thread or stream to another (a launch reaching the device, a sync returning to
 *  the CPU, a wait on another stream). Segments with no track are left out. */
export function pathArrows(segments: readonly PathSegment[]): [number, number][] {
  const arrows: [number, number][] = [];
  for (let i = 0; i + 1 < segments.length; i += 1) {
    const a = segments[i].track;
    const b = segments[i + 1].track;
    if (a >= 0 && b >= 0 && a !== b) arrows.push([i, i + 1]);
  }
  return arrows;
}

/** The segment on `track` under time `t` (the path's segments follow each other in time), or
 *  the nearest on that track within `slackUs`; -1 if none. */
export function pathSegmentAt(segments: readonly PathSegment[], track: number, t: number, slackUs: number): number {
  // first segment ending at or after t - slack
  let lo = 0;
  let hi = segments.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (segments[mid].end < t - slackUs) lo = mid + 1;
    else hi = mid;
  }
  let best = -1;
  let bestGap = Infinity;
  for (let i = lo; i < segments.length && segments[i].start <= t + slackUs; i += 1) {
    const s = segments[i];
    if (s.track !== track) continue;
    const gap = t < s.start ? s.start - t : t > s.end ? t - s.end : 0;
    if (gap < bestGap) {
      best = i;
      bestGap = gap;
    }
  }
  return best;
}

/** Pixel bands [track, x0, x1] covering the segments between canvas x `left` and `right`
 *  (`x` maps µs to canvas x), each at least `minPx` wide, those of one track that touch or
 *  overlap merged: what stays undimmed and gets the path's outline. */
export function pathBands(segments: readonly PathSegment[], x: (t: number) => number, left: number, right: number, minPx: number): [number, number, number][] {
  const open = new Map<number, [number, number, number]>();
  const bands: [number, number, number][] = [];
  for (const s of segments) {
    if (s.track < 0) continue;
    let x0 = x(s.start);
    let x1 = x(s.end);
    if (x1 < left || x0 > right) continue;
    if (x1 - x0 < minPx) {
      const mid = (x0 + x1) / 2;
      x0 = mid - minPx / 2;
      x1 = mid + minPx / 2;
    }
    x0 = Math.max(x0, left - 2);
    x1 = Math.min(x1, right + 2);
    const last = open.get(s.track);
    if (last && x0 <= last[2] + 0.5) {
      last[2] = Math.max(last[2], x1);
      continue;
    }
    const band: [number, number, number] = [s.track, x0, x1];
    open.set(s.track, band);
    bands.push(band);
  }
  return bands;
}
