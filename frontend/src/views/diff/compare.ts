// Which profile Diff compares the selected one (A) with when the URL names none (B): pure
// logic, unit-tested in compare.test.ts. Comparing a GPU step with a CPU one says nothing,
// so B is, in order of preference:
//   1. another span of A's worker (the same program profiled again),
//   2. another worker of A's run (same program, same kind of device),
//   3. another run whose device type (`/info` device_type) is A's, one with the same workers
//      (the same job recorded again) before the others, each group in run order,
// and nothing otherwise: the page says so instead of comparing unlike profiles.

import type { RunInfo } from '../../api/types';

export interface Side {
  run: string;
  worker: string;
  /** null: the first span of that worker other than A's (known once its spans are listed). */
  span: number | null;
}

export type Choice =
  | { kind: 'found'; b: Side; why: string }
  | { kind: 'probe'; run: RunInfo }
  | { kind: 'none'; why: string };

/** The comparison for A given the device types known so far (`deviceOf`: run → type); asks
 *  for the next run to probe while the answer depends on one whose type is unknown. */
export function chooseComparison(a: { run: string; worker: string; span: number }, runs: readonly RunInfo[], deviceA: string | null, deviceOf: ReadonlyMap<string, string | null>): Choice {
  const current = runs.find((r) => r.name === a.run);
  if (current && current.spans > 1) return { kind: 'found', b: { run: a.run, worker: a.worker, span: null }, why: 'another span of this worker' };
  const otherWorker = current?.workers.find((w) => w !== a.worker);
  if (otherWorker) return { kind: 'found', b: { run: a.run, worker: otherWorker, span: a.span }, why: 'another worker of this run' };
  if (deviceA === null) return { kind: 'none', why: 'the device type of this profile is not known' };
  const workersA = current?.workers ?? [a.worker];
  const sameWorkers = (run: RunInfo) => run.workers.length === workersA.length && run.workers.every((w) => workersA.includes(w));
  const others = runs.filter((run) => run.name !== a.run && run.workers.length);
  for (const run of [...others.filter(sameWorkers), ...others.filter((r) => !sameWorkers(r))]) {
    if (!deviceOf.has(run.name)) return { kind: 'probe', run };
    if (deviceOf.get(run.name) !== deviceA) continue;
    const worker = run.workers.includes(a.worker) ? a.worker : run.workers[0];
    const why = sameWorkers(run) ? `another ${deviceA} run with the same workers` : `another ${deviceA} run, with other workers (${run.workers.slice(0, 3).join(', ')})`;
    return { kind: 'found', b: { run: run.name, worker, span: 1 }, why };
  }
  return { kind: 'none', why: `this run has one span and one worker, and no other run ran on ${deviceA}` };
}
