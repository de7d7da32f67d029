import { describe, expect, it } from 'vitest';
import { loadingLabel, loadingPercent } from './progress';
import type { LoadingReply } from './types';

const reply = (stage: LoadingReply['stage'], fraction: number | null = null): LoadingReply =>
  ({ loading: true, path: 'run/w.pt.trace.json', elapsed_seconds: 1.5, stage, fraction });

describe('loadingLabel', () => {
  it('names each stage of a load', () => {
    expect(loadingLabel(reply('queued'))).toBe('Waiting to load the trace…');
    expect(loadingLabel(reply('reading'), 'run / w span 1')).toBe('Reading run / w span 1…');
    expect(loadingLabel(reply('reading', 0.5), 'run / w span 1')).toBe('Reading run / w span 1… 50%');
    expect(loadingLabel(reply('building'))).toBe('Building the tables of the trace…');
    expect(loadingLabel(reply('computing'))).toBe('Computing the view of the trace…');
  });
  it('tells how much is parsed, rounded down so 100% means done', () => {
    expect(loadingLabel(reply('parsing', 0.4567))).toBe('Parsing the trace… 45%');
    expect(loadingLabel(reply('parsing', 0.999))).toBe('Parsing the trace… 99%');
    expect(loadingLabel(reply('parsing'))).toBe('Parsing the trace…');
  });
  it('counts the traces a view over several of them has, then names the stage of the next', () => {
    const many: LoadingReply = { ...reply('parsing', 0.5), ready: 3, total: 128 };
    expect(loadingLabel(many, 'run / w span 1')).toBe('3 of 128 traces loaded · Parsing the next trace… 50%');
    // the bar: of all of them, 3.5 of 128
    expect(loadingPercent(many)).toBe(2);
    expect(loadingPercent({ ...reply('queued'), ready: 6, total: 8 })).toBe(75);
  });
  it('reads a reply of an older server (no stage) as parsing', () => {
    // not a reply the spec allows (stage, fraction and elapsed_seconds are required now): one of an older server
    expect(loadingLabel({ loading: true, path: 'p' } as unknown as LoadingReply)).toBe('Parsing the trace…');
  });
});

describe('loadingPercent', () => {
  it('clamps to 0..100 and ignores what is not a number', () => {
    expect(loadingPercent(reply('parsing', 1.2))).toBe(100);
    expect(loadingPercent(reply('parsing', -0.1))).toBe(0);
    expect(loadingPercent(reply('parsing', Number.NaN))).toBeNull();
    expect(loadingPercent(reply('building'))).toBeNull();
  });
});
