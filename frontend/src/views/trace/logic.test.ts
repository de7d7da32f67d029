import { describe, expect, it } from 'vitest';
import type { TimelineSlicesReply } from '../../api/types';
import { covers } from './data';
import {
  HEADER_PX,
  idlePythonTracks,
  trackKey,
  bounds,
  centreOn,
  clampWindow,
  COUNTERS_KEY,
  fitText,
  groupTracks,
  hitSlice,
  indexSlices,
  layout,
  LANE_PX,
  MIN_WIDTH_US,
  nameColour,
  panBy,
  placeCounters,
  rowAt,
  seriesOf,
  tickLabel,
  ticks,
  tracksBetween,
  windowLabel,
  zoomAt,
  type TrackInfo,
} from './logic';

const limit = { start: 0, end: 1000 };

describe('window arithmetic', () => {
  it('zooms around the anchor, keeping the time under it in place', () => {
    const v = zoomAt({ start: 0, end: 1000 }, 2, 0.25, limit);
    expect(v.end - v.start).toBeCloseTo(500);
    expect(v.start + 0.25 * (v.end - v.start)).toBeCloseTo(250);
    const out = zoomAt({ start: 100, end: 200 }, 0.5, 0.5, limit);
    expect(out).toEqual({ start: 50, end: 250 });
  });
  it('never zooms out past the trace nor in below the minimum width', () => {
    expect(zoomAt({ start: 0, end: 1000 }, 0.1, 0.5, limit)).toEqual(limit);
    const tiny = zoomAt({ start: 10, end: 11 }, 100, 0.5, limit);
    expect(tiny.end - tiny.start).toBeCloseTo(MIN_WIDTH_US);
  });
  it('pans by a share of the width and stops at the edges', () => {
    expect(panBy({ start: 100, end: 200 }, 0.5, limit)).toEqual({ start: 150, end: 250 });
    expect(panBy({ start: 100, end: 200 }, -5, limit)).toEqual({ start: 0, end: 100 });
    expect(panBy({ start: 800, end: 900 }, 5, limit)).toEqual({ start: 900, end: 1000 });
  });
  it('clamps bad windows and widens the trace span by a margin', () => {
    expect(clampWindow({ start: Number.NaN, end: 5 }, limit).start).toBe(0);
    expect(bounds(0, 100)).toEqual({ start: -2, end: 102 });
  });
  it('centres on an event, widening when it does not fit', () => {
    expect(centreOn({ start: 0, end: 100 }, 500, 510, limit)).toEqual({ start: 455, end: 555 });
    const wide = centreOn({ start: 0, end: 100 }, 500, 700, limit);
    expect(wide.start).toBeLessThan(500);
    expect(wide.end).toBeGreaterThan(700);
  });
});

describe('ruler', () => {
  it('puts ticks 1/2/5 x 10^k apart, at least the minimum spacing', () => {
    const t = ticks({ start: 0, end: 1_000_000 }, 1000, 90);
    expect(t.step).toBe(100_000);
    expect(t.values[0]).toBe(0);
    expect(t.unit).toBe('s');
    expect(tickLabel(300_000, t)).toBe('0.3 s');
    const fine = ticks({ start: 163_900, end: 163_950 }, 1000, 90);
    expect(fine.step).toBe(5);
    expect(fine.unit).toBe('µs');
    expect(tickLabel(163_920, fine)).toBe('163,920 µs');
    const ms = ticks({ start: 0, end: 10_000 }, 1000, 90);
    expect(ms.step).toBe(1000);
    expect(tickLabel(4000, ms)).toBe('4 ms');
    const mid = ticks({ start: 163_000, end: 165_000 }, 1000, 90);
    expect(mid.step).toBe(200);
    expect(tickLabel(163_800, mid)).toBe('163.8 ms');
    const sub = ticks({ start: 10, end: 12 }, 1000, 90);
    expect(sub.step).toBeCloseTo(0.2);
    expect(tickLabel(10.4, sub)).toBe('10.4 µs');
  });
  it('labels a window with the precision its width needs', () => {
    expect(windowLabel({ start: 16_551_520, end: 16_553_370 })).toBe('16,551.52 ms – 16,553.37 ms');
    expect(windowLabel({ start: -21_313, end: 1_086_971 })).toBe('-0.02 s – 1.09 s');
    expect(windowLabel({ start: 100, end: 150 })).toBe('100.0 µs – 150.0 µs');
  });
  it('labels negative times and zero', () => {
    const t = ticks({ start: -300, end: 1000 }, 1300, 90);
    expect(t.values[0]).toBeLessThanOrEqual(-100);
    expect(tickLabel(0, t)).toBe('0.0 ms');
    expect(tickLabel(-0.00001, t)).toBe('0.0 ms');
    expect(tickLabel(-200, t)).toBe('-0.2 ms');
  });
});

const track = (id: number, pid: string, process: string, lanes: number): TrackInfo => ({ track: id, kind: 'thread', process, thread: `t${id}`, pid, tid: `${id}`, lanes, events: 10 });

describe('layout', () => {
  const tracks = [track(0, '1', 'python (CPU)', 3), track(1, '1', 'python (CPU)', 1), track(2, '0', 'GPU 0', 2), track(3, '9', 'python (CPU)', 1)];
  it('groups tracks by process in server order and tells equal names apart', () => {
    const groups = groupTracks(tracks);
    expect(groups.map((g) => g.tracks.map((t) => t.track))).toEqual([[0, 1], [2], [3]]);
    expect(groups[0].label).toBe('python (CPU) [pid 1]');
    expect(groups[1].label).toBe('GPU 0');
  });
  it('stacks counters, headers and lanes; collapsed groups keep only their header', () => {
    const groups = groupTracks(tracks);
    const open = layout(groups, ['util'], new Set());
    expect(open.rows.map((r) => r.type)).toEqual(['header', 'counter', 'header', 'track', 'track', 'header', 'track', 'header', 'track']);
    expect(open.visibleTracks).toEqual([0, 1, 2, 3]);
    const top0 = open.trackTop.get(0) as number;
    expect(open.trackTop.get(1)).toBe(top0 + 3 * LANE_PX + 4);
    const closed = layout(groups, ['util'], new Set([groups[0].key, COUNTERS_KEY]));
    expect(closed.visibleTracks).toEqual([2, 3]);
    expect(closed.rows.filter((r) => r.type === 'counter')).toEqual([]);
    expect(closed.height).toBeLessThan(open.height);
    expect(rowAt(open.rows, top0 + 1)?.type).toBe('track');
    expect(rowAt(open.rows, open.height + 5)).toBeNull();
    expect(tracksBetween(open.rows, top0 + 1, (open.trackTop.get(2) as number) + 1)).toEqual([0, 1, 2]);
  });
  it('finds the Python frames of threads with nothing else, and folds a track to one header line', () => {
    const python = (id: number, tid: string, lanes: number): TrackInfo => ({ ...track(id, '1', 'python (CPU)', lanes), kind: 'python', tid, thread: `thread ${tid} · Python frames` });
    const all = [python(0, '0', 14), { ...track(1, '1', 'python (CPU)', 8), tid: '517' }, python(2, '517', 38), track(3, '0', 'GPU 0', 2)];
    expect(idlePythonTracks(all).map((t) => t.track)).toEqual([0]);
    const groups = groupTracks(all);
    const folded = layout(groups, [], new Set([trackKey(all[0])]));
    expect(folded.rows.slice(0, 3).map((r) => r.type)).toEqual(['header', 'header', 'track']);
    expect(folded.rows[1]).toMatchObject({ key: 'track:0', collapsed: true, label: 'thread 0 · Python frames', detail: '14 levels · 10 events' });
    expect(folded.visibleTracks).toEqual([1, 2, 3]);
    expect(folded.height).toBe(layout(groups, [], new Set()).height - (14 * LANE_PX + 4) + HEADER_PX);
  });
  it('puts a group’s own counters under its header, before its tracks, and hides them with it', () => {
    const groups = groupTracks(tracks);
    const own = new Map([[groups[1].key, [{ name: 'Rank 1 · GPU 0 utilization', label: 'GPU 0 utilization' }]]]);
    const open = layout(groups, [], new Set(), own);
    expect(open.rows.map((r) => r.type)).toEqual(['header', 'track', 'track', 'header', 'counter', 'track', 'header', 'track']);
    const counter = open.rows[4];
    expect(counter.type === 'counter' && [counter.name, counter.label]).toEqual(['Rank 1 · GPU 0 utilization', 'GPU 0 utilization']);
    expect(open.trackTop.get(2)).toBe(counter.y + counter.h);
    const closed = layout(groups, [], new Set([groups[1].key]), own);
    expect(closed.rows.filter((r) => r.type === 'counter')).toEqual([]);
  });
  it('draws a device’s hardware counters in that device’s group, the others on top', () => {
    const groups = groupTracks(tracks);
    const series = (name: string, pid = '') => ({ name, unit: '', time_us: [0], value: [1], max: [1], pid });
    const placed = placeCounters([series('GPU 0 utilization', ''), series('GPU 0 sm__throughput', '0'), series('GPU 3 sm__throughput', '3'), series('memory')], groups);
    expect(placed.top).toEqual(['GPU 0 utilization', 'GPU 3 sm__throughput', 'memory']); // GPU 3 has no group
    expect([...placed.byGroup]).toEqual([[groups[1].key, [{ name: 'GPU 0 sm__throughput', label: 'GPU 0 sm__throughput' }]]]);
    const rows = layout(groups, placed.top, new Set(), placed.byGroup).rows;
    const gpu = rows.findIndex((r) => r.type === 'header' && r.key === groups[1].key);
    expect(rows[gpu + 1]).toMatchObject({ type: 'counter', name: 'GPU 0 sm__throughput' });
  });
  it('finds a counter row its series by name, whatever order the reply lists them in', () => {
    const rows = layout([], ['util', 'memory'], new Set()).rows.filter((r) => r.type === 'counter');
    const series = (name: string) => ({ name, unit: '%', time_us: [0], value: [1], max: [1], pid: '' });
    const reply = [series('memory'), series('util')];
    expect(rows.map((r) => seriesOf(reply, r as { name: string })?.name)).toEqual(['util', 'memory']);
    // A reply from before the layout caught up (a series gone): nothing to draw, no crash.
    expect(seriesOf([series('util')], rows[1] as { name: string })).toBeUndefined();
    expect(seriesOf(null, rows[0] as { name: string })).toBeUndefined();
  });
});

describe('slices', () => {
  const reply: TimelineSlicesReply = {
    track: [0, 0, 0, 1],
    lane: [0, 0, 1, 0],
    start_us: [50, 0, 10, 0],
    dur_us: [10, 20, 5, 100],
    name: [0, 1, 0, 1],
    count: [1, 1, 1, 7],
    busy_us: [10, 20, 5, 40],
    event: [3, 4, 5, -1],
    kind: [0, 0, 0, -1],
    names: ['a', 'b'],
    kinds: ['op'],
  };
  it('finds the slice under a time on a lane, or the nearest within the slack', () => {
    const data = indexSlices(reply);
    expect(data.groups.get('0:0')).toEqual([1, 0]);
    expect(hitSlice(data, 0, 0, 55, 0)).toBe(0);
    expect(hitSlice(data, 0, 0, 5, 0)).toBe(1);
    expect(hitSlice(data, 0, 0, 35, 1)).toBe(-1);
    expect(hitSlice(data, 0, 0, 48, 3)).toBe(0);
    expect(hitSlice(data, 0, 1, 12, 0)).toBe(2);
    expect(hitSlice(data, 1, 0, 60, 0)).toBe(3);
    expect(hitSlice(data, 2, 0, 60, 0)).toBe(-1);
  });
  it('colours by name, stably', () => {
    expect(nameColour('aten::conv2d', false)).toBe(nameColour('aten::conv2d', false));
    expect(nameColour('aten::conv2d', false)).toMatch(/^#[0-9a-f]{6}$/);
    expect(fitText('abcdefghij', 60, 6)).toBe('abcdefghij');
    expect(fitText('abcdefghij', 30, 6)).toBe('abcd…');
    expect(fitText('abcdefghij', 12, 6)).toBe('');
  });
});

describe('fetching', () => {
  it('refetches when the window leaves what was fetched, the zoom changes or the tracks do', () => {
    const f = { start: 0, end: 100, resolution: 1, tracks: '' };
    expect(covers(f, { start: 10, end: 90 }, 1.1, '')).toBe(true);
    expect(covers(f, { start: 10, end: 110 }, 1, '')).toBe(false);
    expect(covers(f, { start: 10, end: 90 }, 0.5, '')).toBe(false);
    expect(covers(f, { start: 10, end: 90 }, 1, '1,2')).toBe(false);
    expect(covers(null, { start: 10, end: 90 }, 1, '')).toBe(false);
  });
});
