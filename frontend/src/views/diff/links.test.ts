import { describe, expect, it } from 'vitest';
import { traceHref } from './links';

describe('traceHref', () => {
  const page = 'http://host/data/plugin/pytorch_profiler/index.html?run=a&worker=w0&span=1&view=diff&run_b=b&worker_b=w1&span_b=2';
  it('opens the other profile at the call, highlighted, and drops the Diff selection', () => {
    const href = new URL(traceHref(page, { run: 'b', worker: 'w1', span: 2 }, 1000, 40)!);
    expect(href.pathname).toBe('/data/plugin/pytorch_profiler/index.html');
    const p = href.searchParams;
    expect([p.get('run'), p.get('worker'), p.get('span'), p.get('view')]).toEqual(['b', 'w1', '2', 'trace']);
    expect([p.get('trace_range_start_us'), p.get('trace_range_end_us')]).toEqual(['1000', '1040']);
    // half the call's length on each side (at least 10 µs)
    expect([p.get('trace_start_us'), p.get('trace_end_us')]).toEqual(['980', '1060']);
    expect(p.get('run_b')).toBeNull();
  });
  it('has no link for a side without the call', () => {
    expect(traceHref(page, { run: 'a', worker: 'w0', span: 1 }, null, null)).toBeNull();
  });
});
