import { describe, expect, it } from 'vitest';
import { onAxis, rankCounters, signedDuration } from './RanksTrace';
import { expandable, MAX_EXPANDED, rankList } from './RankTools';

describe('ranks on one axis', () => {
  it('places a rank’s own event on the shared axis: its tracks after its summary track, its times shifted', () => {
    const rank = { track: 2 * (1 << 20), shift_us: -2500 };
    const e = { event: 7, track: 3, lane: 1, ts_us: 1000, dur_us: 40 };
    expect(onAxis(rank, e)).toEqual({ event: 7, track: 2 * (1 << 20) + 4, lane: 1, ts_us: -1500, dur_us: 40 });
  });

  it('keeps an endpoint without a place (track -1) without one', () => {
    expect(onAxis({ track: 0, shift_us: 10 }, { event: 1, track: -1, lane: 0, ts_us: 0, dur_us: 0 }).track).toBe(-1);
  });

  it('signs offsets', () => {
    expect(signedDuration(-11.4)).toMatch(/^−/);
    expect(signedDuration(0)).toMatch(/^\+/);
  });

  it('names each rank’s counter series apart, keeping its numbers', () => {
    const series = { name: 'GPU 0 utilization', unit: '%', time_us: [0, 10], value: [1, 2], max: [1, 2], pid: '', worker: 'w1' };
    const named = rankCounters([{ ...series, rank: 1 }, { ...series, rank: 3 }]);
    expect(named.map((s) => s.name)).toEqual(['Rank 1 · GPU 0 utilization', 'Rank 3 · GPU 0 utilization']);
    expect(named[0].value).toEqual([1, 2]);
  });

  it('lists ranks left out and expands no more than may be open', () => {
    expect(rankList([2])).toBe('rank 2');
    expect(rankList([1, 3, 4])).toBe('ranks 1, 3 and 4');
    expect(rankList([...Array(20).keys()])).toBe('ranks 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 10 more');
    expect(expandable([5, 6, 7], MAX_EXPANDED - 2)).toEqual([5, 6]);
    expect(expandable([5], MAX_EXPANDED)).toEqual([]);
  });
});
