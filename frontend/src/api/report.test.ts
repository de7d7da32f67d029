import { describe, expect, it } from 'vitest';
import { ApiError, answerKey, embeddedAnswer } from './client';

const base = { run: '.', worker: 'w0', span: 1 };
const slicesKey = (start: number, end: number, resolution: number) => answerKey('timeline_slices', { ...base, start_us: start, end_us: end, resolution_us: resolution });
// a report of a trace from 0 to 1000 µs: the whole at 0.5 µs per slice, step 2 (400-500 µs) in full detail
const data = {
  answers: {
    [answerKey('operators', { ...base, group_by: 'name' })]: [200, { columns: ['name'], rows: [['aten::mm']] }] as [number, unknown],
    [answerKey('memory_stats', { ...base, device: 'GPU9' })]: [404, { error: 'not_found', reason: 'no device GPU9' }] as [number, unknown],
    [slicesKey(-250, 1250, 0.5)]: [200, { whole: true }] as [number, unknown],
    [slicesKey(375, 525, 0.001)]: [200, { detail: true }] as [number, unknown],
  },
  windows: [
    { route: 'timeline_slices', scope: answerKey('timeline_slices', base), start_us: -250, end_us: 1250, resolution_us: 0.5, key: slicesKey(-250, 1250, 0.5) },
    { route: 'timeline_slices', scope: answerKey('timeline_slices', base), start_us: 375, end_us: 525, resolution_us: 0.001, key: slicesKey(375, 525, 0.001) },
  ],
  location: {},
  notes: { [answerKey('timeline', base)]: 'step 2', [answerKey('critical_path', base)]: 'the critical path of steps 1 and 2 only' },
};

describe('answerKey', () => {
  it('is the key tb_plugin/report.py answer_key writes: names sorted, empty values left out', () => {
    // the same string tests/test_report.py expects of answer_key
    expect(answerKey('kernels', { worker: 'w0', run: '.', span: 1, top: '', q: null })).toBe('["kernels",[["run","."],["span","1"],["worker","w0"]]]');
  });
});

describe('embeddedAnswer', () => {
  it('answers a request the report holds, whatever the order of its parameters', () => {
    expect(embeddedAnswer(data, 'operators', { group_by: 'name', span: 1, worker: 'w0', run: '.' })).toEqual({ columns: ['name'], rows: [['aten::mm']] });
  });
  it("refuses as the server refused, with the server's reason", () => {
    expect(() => embeddedAnswer(data, 'memory_stats', { ...base, device: 'GPU9' })).toThrow('no device GPU9');
  });
  it('says how to see what it does not hold', () => {
    try {
      embeddedAnswer(data, 'operator_stacks', { ...base, name: 'aten::mm' });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ApiError);
      expect((error as ApiError).reason).toContain('TensorBoard');
    }
  });
  it('says which choices it holds of a route it holds only some of', () => {
    expect(() => embeddedAnswer(data, 'critical_path', { ...base, step: 3, table: 'segments' }))
      .toThrow('This report holds the critical path of steps 1 and 2 only. To see it, open the run in TensorBoard');
    expect(() => embeddedAnswer(data, 'critical_path', { run: '.', worker: 'w1', span: 1, step: 3 })).toThrow('does not hold this answer');
  });
  it('draws the whole trace zoomed out from its coarse window, tracks hidden or not', () => {
    expect(embeddedAnswer(data, 'timeline_slices', { ...base, start_us: -250, end_us: 1250, resolution_us: 0.75, tracks: '1,2' })).toEqual({ whole: true });
  });
  it('draws the chosen step in full detail, at any zoom inside it', () => {
    expect(embeddedAnswer(data, 'timeline_slices', { ...base, start_us: 380, end_us: 520, resolution_us: 0.1 })).toEqual({ detail: true });
    expect(embeddedAnswer(data, 'timeline_slices', { ...base, start_us: 440, end_us: 441, resolution_us: 0.0005 })).toEqual({ detail: true });
  });
  it('says which step it holds for a window zoomed in elsewhere', () => {
    expect(() => embeddedAnswer(data, 'timeline_slices', { ...base, start_us: 100, end_us: 110, resolution_us: 0.01 })).toThrow('step 2 in full detail');
  });
});
