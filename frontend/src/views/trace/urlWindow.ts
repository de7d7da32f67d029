// The Trace view's visible window and shift+dragged range, kept in the page URL
// (trace_start_us / trace_end_us, trace_range_start_us / trace_range_end_us) so a link reopens
// them: one hook each for the single-worker and the all-ranks timelines.

import { useCallback, useEffect, useState } from 'preact/hooks';
import { setParams } from '../../base/url';
import { useUrlParam } from '../../components/useUrlParam';
import type { Range } from './draw';
import { clampWindow, type Window } from './logic';

/** A number from a URL parameter; null when empty or not a number. */
export function numberParam(text: string): number | null {
  if (text === '') return null;
  const v = Number(text);
  return Number.isFinite(v) ? v : null;
}

/** µs rounded to the nanosecond for the URL. */
export const roundUs = (v: number) => Math.round(v * 1000) / 1000;

/** [window, setWindow] within `limit`: from the URL when a link reopens the view (else
 * `initial`, by default the whole of `limit`), written back once it settles (browsers
 * rate-limit replaceState). `setWindow` takes a window or a function of the current one;
 * either way the result is clamped to `limit`. */
export function useUrlWindow(limit: Window, initial: Window = limit): [Window, (next: Window | ((current: Window) => Window)) => void] {
  const [startParam] = useUrlParam('trace_start_us', '');
  const [endParam] = useUrlParam('trace_end_us', '');
  const [view, setViewState] = useState<Window>(() => {
    const s = numberParam(startParam);
    const e = numberParam(endParam);
    return s !== null && e !== null && e > s ? clampWindow({ start: s, end: e }, limit) : clampWindow(initial, limit);
  });
  const setView = useCallback(
    (next: Window | ((current: Window) => Window)) =>
      setViewState((current) => clampWindow(typeof next === 'function' ? next(current) : next, limit)),
    [limit],
  );
  useEffect(() => {
    const timer = setTimeout(() => setParams({ trace_start_us: roundUs(view.start), trace_end_us: roundUs(view.end) }), 250);
    return () => clearTimeout(timer);
  }, [view]);
  return [view, setView];
}

/** [range, setRange]: the highlighted range, from the URL when a link (another view's "show in
 *  the trace") gives one; its tracks are the page's alone. */
export function useUrlRange(): [Range | null, (next: Range | null) => void] {
  const [startParam] = useUrlParam('trace_range_start_us', '');
  const [endParam] = useUrlParam('trace_range_end_us', '');
  const [range, setRangeState] = useState<Range | null>(() => {
    const s = numberParam(startParam);
    const e = numberParam(endParam);
    return s !== null && e !== null && e > s ? { start: s, end: e, tracks: [] } : null;
  });
  const setRange = useCallback((next: Range | null) => {
    setRangeState(next);
    setParams({ trace_range_start_us: next ? roundUs(next.start) : null, trace_range_end_us: next ? roundUs(next.end) : null });
  }, []);
  return [range, setRange];
}
