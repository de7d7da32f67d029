import { describe, expect, it } from 'vitest';
import type { RunInfo } from '../../api/types';
import { chooseComparison } from './compare';

const run = (name: string, workers: string[], spans: number): RunInfo => ({ name, workers, spans, files: workers.length * spans, loaded: 0, loading: false, errors: [], snapshots: [] });
const RUNS = [run('cpu_cnn', ['worker0'], 2), run('cpu_ddp_gloo', ['worker0', 'worker1'], 2), run('gpu_a100_nccl', ['rank0'], 1), run('gpu_resnet50_v100', ['worker0'], 1)];
const A100 = { run: 'gpu_a100_nccl', worker: 'rank0', span: 1 };

describe('chooseComparison', () => {
  it('prefers another span of the same worker, then another worker of the run', () => {
    expect(chooseComparison({ run: 'cpu_cnn', worker: 'worker0', span: 1 }, RUNS, 'CPU', new Map())).toMatchObject({ kind: 'found', b: { run: 'cpu_cnn', worker: 'worker0', span: null } });
    const oneSpan = [run('ddp', ['worker0', 'worker1'], 1)];
    expect(chooseComparison({ run: 'ddp', worker: 'worker1', span: 1 }, oneSpan, 'CPU', new Map())).toMatchObject({ kind: 'found', b: { run: 'ddp', worker: 'worker0', span: 1 } });
  });
  it('asks for device types in run order and skips runs of another device', () => {
    expect(chooseComparison(A100, RUNS, 'CUDA', new Map())).toMatchObject({ kind: 'probe', run: { name: 'cpu_cnn' } });
    const known = new Map<string, string | null>([['cpu_cnn', 'CPU'], ['cpu_ddp_gloo', 'CPU']]);
    expect(chooseComparison(A100, RUNS, 'CUDA', known)).toMatchObject({ kind: 'probe', run: { name: 'gpu_resnet50_v100' } });
    known.set('gpu_resnet50_v100', 'CUDA');
    expect(chooseComparison(A100, RUNS, 'CUDA', known)).toMatchObject({ kind: 'found', b: { run: 'gpu_resnet50_v100', worker: 'worker0', span: 1 } });
  });
  it('prefers a run with the same workers, and says which kind it found', () => {
    const runs = [run('other_job', ['worker0'], 1), run('again', ['rank0'], 1), RUNS[2]];
    // the run with A's worker names is probed first, though listed second
    expect(chooseComparison(A100, runs, 'CUDA', new Map())).toMatchObject({ kind: 'probe', run: { name: 'again' } });
    const found = chooseComparison(A100, runs, 'CUDA', new Map([['again', 'CUDA'], ['other_job', 'CUDA']]));
    expect(found).toMatchObject({ kind: 'found', b: { run: 'again', worker: 'rank0', span: 1 }, why: 'another CUDA run with the same workers' });
    const other = chooseComparison(A100, runs, 'CUDA', new Map<string, string | null>([['again', 'CPU'], ['other_job', 'CUDA']]));
    expect(other).toMatchObject({ kind: 'found', b: { run: 'other_job' } });
    expect(other.kind === 'found' && other.why).toContain('other workers (worker0)');
  });
  it('says when nothing is comparable instead of picking a CPU run for a GPU one', () => {
    const runs = [RUNS[0], RUNS[2]];
    const choice = chooseComparison(A100, runs, 'CUDA', new Map([['cpu_cnn', 'CPU']]));
    expect(choice.kind).toBe('none');
    expect(choice.kind === 'none' && choice.why).toContain('CUDA');
    // A run that failed to load (type null) is not comparable either.
    expect(chooseComparison(A100, runs, 'CUDA', new Map([['cpu_cnn', null]])).kind).toBe('none');
  });
});
