import { describe, expect, it } from 'vitest';
import { runHoldings } from './holdings';

const snapshot = { name: 'rank0', span: 1, path: 'job/rank0.pickle', status: 'ready', reason: '' } as never;

describe('runHoldings', () => {
  it('names what a run holds, and only that', () => {
    expect(runHoldings({ workers: [], spans: 0, snapshots: [snapshot, snapshot] })).toBe('2 memory snapshots');
    expect(runHoldings({ workers: ['w0'], spans: 1, snapshots: [] })).toBe('1 worker · 1 span');
    expect(runHoldings({ workers: ['w0', 'w1'], spans: 3, snapshots: [snapshot] })).toBe('2 workers · 3 spans · 1 memory snapshot');
  });
});
