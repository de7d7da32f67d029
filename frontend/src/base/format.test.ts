import { describe, expect, it } from 'vitest';
import { axisText, byteTickInterval, durationTicks, deltaSign, formatBandwidth, formatBytes, formatDelta, formatDuration, formatFlops, formatNumber, formatPct, formatShare, formatTflops, plural, roundAxis, timeTickInterval } from './format';

describe('formatDuration', () => {
  it('keeps microseconds below a millisecond, one decimal, no trailing zero', () => {
    expect(formatDuration(0)).toBe('0 µs');
    expect(formatDuration(12.34)).toBe('12.3 µs');
    expect(formatDuration(999.94)).toBe('999.9 µs');
    expect(formatDuration(40)).toBe('40 µs');
  });
  it('switches to ms and s with two decimals', () => {
    expect(formatDuration(1000)).toBe('1.00 ms');
    expect(formatDuration(4568.188)).toBe('4.57 ms');
    expect(formatDuration(177592.1666)).toBe('177.59 ms');
    expect(formatDuration(1_234_567)).toBe('1.23 s');
  });
  it('signs negatives and marks missing values', () => {
    expect(formatDuration(-2500)).toBe('-2.50 ms');
    expect(formatDuration(null)).toBe('—');
    expect(formatDuration(undefined)).toBe('—');
    expect(formatDuration(Number.NaN)).toBe('—');
  });
  it('never shows "-0" for a negative value that rounds to zero', () => {
    expect(formatDuration(-0.04)).toBe('0 µs');
    expect(formatDuration(-0.05)).toBe('-0.1 µs');
    expect(formatDuration(-1e-9)).toBe('0 µs');
  });
  it('moves to the next unit where rounding would reach it', () => {
    expect(formatDuration(999.96)).toBe('1.00 ms');
    expect(formatDuration(-999.96)).toBe('-1.00 ms');
    expect(formatDuration(999_996)).toBe('1.00 s');
  });
});

describe('formatBytes', () => {
  it('uses binary units', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1023)).toBe('1023 B');
    expect(formatBytes(1024)).toBe('1.00 KiB');
    expect(formatBytes(1536)).toBe('1.50 KiB');
    expect(formatBytes(1363568)).toBe('1.30 MiB');
    expect(formatBytes(34084028416)).toBe('31.74 GiB');
    expect(formatBytes(5 * 1024 ** 4)).toBe('5.00 TiB');
    expect(formatBytes(1024 ** 5)).toBe('1024.00 TiB');
  });
  it('signs negatives (memory released) and marks missing values', () => {
    expect(formatBytes(-356452064)).toBe('-339.94 MiB');
    expect(formatBytes(null)).toBe('—');
    expect(formatBytes(-0.4)).toBe('0 B');
  });
});

describe('numbers and percentages', () => {
  it('groups thousands', () => {
    expect(formatNumber(2994)).toBe('2,994');
    expect(formatNumber(-1234567)).toBe('-1,234,567');
    expect(formatNumber(1234.5)).toBe('1,234.5');
    expect(formatNumber(0.125)).toBe('0.13');
    expect(formatNumber(null)).toBe('—');
    expect(formatNumber(-0.001)).toBe('0');
    expect(formatNumber(-1234.567)).toBe('-1,234.57');
  });
  it('formats percentages and shares', () => {
    expect(formatPct(55.514085)).toBe('55.5 %');
    expect(formatPct(null)).toBe('—');
    expect(formatPct(-0.01)).toBe('0.0 %');
    expect(formatPct(-12.34)).toBe('-12.3 %');
    expect(formatShare(0.0659)).toBe('6.6 %');
  });
  it('signs deltas', () => {
    expect(formatDelta(1500, formatDuration)).toBe('+1.50 ms');
    expect(formatDelta(-20, formatDuration)).toBe('-20 µs');
    expect(formatDelta(0, formatDuration)).toBe('0 µs');
    expect(formatDelta(null, formatDuration)).toBe('—');
    expect(formatDelta(0.04, formatDuration)).toBe('0 µs');
    expect(formatDelta(-0.04, formatDuration)).toBe('0 µs');
    expect(deltaSign(0.04, formatDuration)).toBe(0);
    expect(deltaSign(-0.2, formatDuration)).toBe(-1);
    expect(deltaSign(3, formatNumber)).toBe(1);
  });
});

describe('axes', () => {
  it('drops trailing decimal zeros of tick labels', () => {
    expect(axisText('210.00 ms')).toBe('210 ms');
    expect(axisText('1.50 MiB')).toBe('1.5 MiB');
    expect(axisText('1.25 MiB')).toBe('1.25 MiB');
    expect(axisText('0 µs')).toBe('0 µs');
    expect(axisText('500 µs')).toBe('500 µs');
    expect(axisText('-2.00 s')).toBe('-2 s');
    expect(axisText('1,000.50 x')).toBe('1,000.5 x');
  });
  it('spaces byte ticks by round binary amounts', () => {
    const labels = (max: number) => {
      const step = byteTickInterval(max);
      const out: string[] = [];
      for (let v = 0; v <= Math.ceil(max / step) * step; v += step) out.push(axisText(formatBytes(v)));
      return out;
    };
    expect(labels(1.43 * 1024 ** 2)).toEqual(['0 B', '512 KiB', '1 MiB', '1.5 MiB']);
    expect(labels(55.13 * 1024 ** 2)).toEqual(['0 B', '16 MiB', '32 MiB', '48 MiB', '64 MiB']);
    expect(labels(2.6 * 1024 ** 3)).toEqual(['0 B', '1 GiB', '2 GiB', '3 GiB']);
    expect(labels(700)).toEqual(['0 B', '256 B', '512 B', '768 B']);
    expect(labels(900 * 1024)).toEqual(['0 B', '256 KiB', '512 KiB', '768 KiB', '1 MiB']);
    expect(byteTickInterval(0)).toBe(1);
  });
  it('spaces time ticks by 1, 2 or 5 times a power of ten, from a round start', () => {
    const labels = (min: number, max: number) => {
      const axis = roundAxis(min, max, timeTickInterval(max - min));
      const out: string[] = [];
      for (let v = axis.min; v <= axis.max + 1e-9; v += axis.interval) out.push(axisText(formatDuration(v)));
      return out;
    };
    // The memory curve of a trace starting at 297.6 µs and ending at 1.03 s.
    expect(labels(297.6, 1_030_000)).toEqual(['0 µs', '200 ms', '400 ms', '600 ms', '800 ms', '1 s', '1.2 s']);
    expect(labels(2_000, 5_000)).toEqual(['2 ms', '2.5 ms', '3 ms', '3.5 ms', '4 ms', '4.5 ms', '5 ms']);
    expect(timeTickInterval(0)).toBe(1);
    expect(roundAxis(5, 5, 1)).toEqual({ min: 5, max: 6, interval: 1 });
  });
});

describe('plural', () => {
  it('says "1 track", "2 tracks"', () => {
    expect(plural(1, 'track')).toBe('1 track');
    expect(plural(2, 'track')).toBe('2 tracks');
    expect(plural(1200, 'event')).toBe('1,200 events');
  });
});

describe('formatBandwidth', () => {
  it('is always in GB/s, three significant digits when small', () => {
    expect(formatBandwidth(9.375535)).toBe('9.38 GB/s');
    expect(formatBandwidth(0.000186)).toBe('0.000186 GB/s');
    expect(formatBandwidth(0.04)).toBe('0.04 GB/s');
    expect(formatBandwidth(40.04)).toBe('40.0 GB/s');
    expect(formatBandwidth(350.4)).toBe('350 GB/s');
    expect(formatBandwidth(0)).toBe('0.00 GB/s');
    expect(formatBandwidth(null)).toBe('—');
  });
});

describe('formatBandwidth (collectives)', () => {
  it('shows what NCCL-sized and gloo-sized calls reach, a dash when unknown', () => {
    expect(formatBandwidth(6.558388)).toBe('6.56 GB/s');
    expect(formatBandwidth(0.00908)).toBe('0.00908 GB/s');
    expect(formatBandwidth(0.99999)).toBe('1.00 GB/s');
    expect(formatBandwidth(Number.NaN)).toBe('—');
  });
});

describe('formatFlops / formatTflops', () => {
  it('uses decimal units and a dash when unknown', () => {
    expect(formatFlops(812)).toBe('812 FLOP');
    expect(formatFlops(21233664)).toBe('21.23 MFLOP');
    expect(formatFlops(1.572864e9)).toBe('1.57 GFLOP');
    expect(formatFlops(null)).toBe('—');
    expect(formatTflops(0.0240019)).toBe('0.024 TFLOP/s');
    expect(formatTflops(Number.NaN)).toBe('—');
  });
});

describe('durationTicks', () => {
  it('labels every tick of an axis in the unit of its largest value', () => {
    const ms = durationTicks(15_800);
    expect([0, 3000, 4500, 15_000].map(ms)).toEqual(['0 ms', '3 ms', '4.5 ms', '15 ms']);
    const us = durationTicks(800);
    expect([0, 200, 0.5].map(us)).toEqual(['0 µs', '200 µs', '0.5 µs']);
    expect(durationTicks(2.5e6)(5e5)).toBe('0.5 s');
  });
});
