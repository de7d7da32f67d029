// What a run in the run list holds, in words: its trace files (workers and spans) and its
// memory snapshots, each only when it has some (a run of snapshots alone is not "0 workers").

import type { RunInfo } from '../api/types';

const counted = (n: number, noun: string) => `${n} ${noun}${n === 1 ? '' : 's'}`;

export function runHoldings(run: Pick<RunInfo, 'workers' | 'spans' | 'snapshots'>): string {
  return [
    ...(run.workers.length ? [`${counted(run.workers.length, 'worker')} · ${counted(run.spans, 'span')}`] : []),
    ...(run.snapshots.length ? [counted(run.snapshots.length, 'memory snapshot')] : []),
  ].join(' · ');
}
