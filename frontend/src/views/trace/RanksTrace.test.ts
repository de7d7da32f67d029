import { describe, expect, it } from 'vitest';
import { onAxis, signedDuration } from './RanksTrace';

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
});
