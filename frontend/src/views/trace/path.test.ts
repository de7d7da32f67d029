// The critical path on the timeline: which consecutive segments get an arrow, which segment a
// point hits, and the pixel bands left undimmed (views/trace/logic.ts).

import { describe, expect, it } from 'vitest';
import { pathArrows, pathBands, pathSegmentAt, stepWindow, type PathSegment } from './logic';

/** cpu 0-5 and a launch 5-20 on track 1, K1 20-100 on track 3, a wait 100-110 and K2 110-140
 *  on track 2, the sync 140-145 and cpu 145-200 back on track 1 (the hand-made trace of
 *  tests/test_timeline_critical_path.py). */
const seg = (category: string, start: number, end: number, track: number): PathSegment => ({ category, start, end, dur: end - start, name: '', operator: '', track });
const PATH = [seg('cpu', 0, 5, 1), seg('launch', 5, 20, 1), seg('kernel', 20, 100, 3), seg('stream_wait', 100, 110, 2),
  seg('kernel', 110, 140, 2), seg('sync', 140, 145, 1), seg('cpu', 145, 200, 1)];

describe('pathArrows', () => {
  it('joins the segments where the path changes track', () => {
    expect(pathArrows(PATH)).toEqual([[1, 2], [2, 3], [4, 5]]);
  });
  it('draws no arrow to or from a segment without a track, nor for one segment', () => {
    expect(pathArrows([seg('cpu', 0, 5, 1), seg('kernel', 5, 9, -1), seg('cpu', 9, 12, 1)])).toEqual([]);
    expect(pathArrows([seg('cpu', 0, 5, 1)])).toEqual([]);
    expect(pathArrows([])).toEqual([]);
  });
});

describe('pathSegmentAt', () => {
  it('finds the segment under a time on its track only', () => {
    expect(pathSegmentAt(PATH, 3, 50, 0)).toBe(2);
    expect(pathSegmentAt(PATH, 1, 50, 0)).toBe(-1);
    expect(pathSegmentAt(PATH, 2, 105, 0)).toBe(3);
    expect(pathSegmentAt(PATH, 1, 199, 0)).toBe(6);
  });
  it('takes the nearest within the slack, else none', () => {
    expect(pathSegmentAt(PATH, 3, 103, 5)).toBe(2);
    expect(pathSegmentAt(PATH, 3, 103, 1)).toBe(-1);
    expect(pathSegmentAt(PATH, 1, 250, 10)).toBe(-1);
  });
});

describe('pathBands', () => {
  const x = (t: number) => 100 + t; // 1 µs per pixel, the plot starting at x = 100
  it('merges touching segments of one track, keeps tracks apart', () => {
    expect(pathBands(PATH, x, 100, 400, 2)).toEqual([[1, 100, 120], [3, 120, 200], [2, 200, 240], [1, 240, 300]]);
  });
  it('widens a segment shorter than the minimum around its middle and clips to the plot', () => {
    const short = [seg('kernel', 10, 10.5, 2), seg('cpu', 200, 900, 1)];
    expect(pathBands(short, x, 100, 400, 2)).toEqual([[2, 109.25, 111.25], [1, 300, 402]]);
  });
  it('leaves out segments off screen and those without a track', () => {
    expect(pathBands([seg('cpu', -90, -20, 1), seg('cpu', 0, 5, -1)], x, 100, 400, 2)).toEqual([]);
  });
});

it('frames a step with a margin', () => {
  expect(stepWindow({ start_us: 100, end_us: 200 })).toEqual({ start: 97, end: 203 });
});
