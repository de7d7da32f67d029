// The link from a number to the events behind it: the Trace view opened on a time range.

import { setParams } from '../../base/url';
import type { Column } from '../../components/table/DataTable';

/** Open the Trace view on [start, end] µs (with a margin), the range itself highlighted. */
export function showInTrace(start: number, end: number): void {
  const pad = Math.max((end - start) * 0.05, 1);
  setParams({ view: 'trace', trace_start_us: start - pad, trace_end_us: end + pad, trace_range_start_us: start, trace_range_end_us: end, trace_event: null });
}

/** Open the Trace view on `step` with its critical path drawn (the view frames the step);
 *  the one-trace timeline, since the path is one worker's. */
export function showPathInTrace(step: string | number): void {
  setParams({
    view: 'trace',
    trace_path: step,
    trace_path_segment: null,
    trace_ranks: null,
    trace_start_us: null,
    trace_end_us: null,
    trace_range_start_us: null,
    trace_range_end_us: null,
    trace_event: null,
  });
}

/** A device stream as one column ("GPU 0 · stream 7"), sorted by stream id: a column of any
 *  table with number columns `device` and `stream`. */
export const streamColumn: Column<{ device: number; stream: number }> = { key: 'stream', label: 'Stream', format: (v, r) => `GPU ${r.device} · stream ${v}` };
