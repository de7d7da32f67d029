import { describe, expect, it } from 'vitest';
import { formatBytes, formatDelta, formatDuration, formatNumber, formatPct, formatShare } from './format';

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
});

describe('formatBytes', () => {
  it('uses binary units', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1023)).toBe('1023 B');
    expect(formatBytes(1024)).toBe('1.00 KB');
    expect(formatBytes(1536)).toBe('1.50 KB');
    expect(formatBytes(1363568)).toBe('1.30 MB');
    expect(formatBytes(34084028416)).toBe('31.74 GB');
    expect(formatBytes(5 * 1024 ** 4)).toBe('5.00 TB');
    expect(formatBytes(1024 ** 5)).toBe('1024.00 TB');
  });
  it('signs negatives (memory released) and marks missing values', () => {
    expect(formatBytes(-356452064)).toBe('-339.94 MB');
    expect(formatBytes(null)).toBe('—');
  });
});

describe('numbers and percentages', () => {
  it('groups thousands', () => {
    expect(formatNumber(2994)).toBe('2,994');
    expect(formatNumber(-1234567)).toBe('-1,234,567');
    expect(formatNumber(1234.5)).toBe('1,234.5');
    expect(formatNumber(0.125)).toBe('0.13');
    expect(formatNumber(null)).toBe('—');
  });
  it('formats percentages and shares', () => {
    expect(formatPct(55.514085)).toBe('55.5 %');
    expect(formatPct(null)).toBe('—');
    expect(formatShare(0.0659)).toBe('6.6 %');
  });
  it('signs deltas', () => {
    expect(formatDelta(1500, formatDuration)).toBe('+1.50 ms');
    expect(formatDelta(-20, formatDuration)).toBe('-20 µs');
    expect(formatDelta(0, formatDuration)).toBe('0 µs');
    expect(formatDelta(null, formatDuration)).toBe('—');
  });
});
