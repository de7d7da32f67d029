// What the timeline draws, fetched for the visible window: /timeline_slices at one pixel's
// resolution and /timeline_counters, for a window a little wider than the one shown (so short
// pans need no request). Requests are debounced while the window moves (at most one every
// MAX_WAIT_MS during a continuous gesture); a newer request aborts the older one and a reply
// that is not the latest is dropped. Each burst counts as one piece of foreground work for the
// app-ready signal, released once the latest reply is applied.

import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { describeError, fetchJson, isAbort, type Params } from '../../api/client';
import type { CounterSeries, TimelineCountersReply, TimelineSlicesReply } from '../../api/types';
import { beginWork, scheduleReady } from '../../base/ready';
import { indexSlices, type SliceData, type Window } from './logic';

const DEBOUNCE_MS = 40;
const MAX_WAIT_MS = 200;
/** Extra time fetched on each side, as a share of the window width. */
const PAD = 0.25;

interface Fetched {
  start: number;
  end: number;
  resolution: number;
  tracks: string;
}

export interface TimelineData {
  slices: SliceData | null;
  counters: CounterSeries[] | null;
  error: string;
  /** Requests issued (for the page's debug attributes). */
  requests: number;
}

/** True when what was fetched still serves `view` at `resolution` µs per pixel. */
export function covers(f: Fetched | null, view: Window, resolution: number, tracks: string): boolean {
  if (!f || f.tracks !== tracks) return false;
  if (view.start < f.start || view.end > f.end) return false;
  const ratio = resolution / f.resolution;
  return ratio > 0.8 && ratio < 1.25;
}

/** What a fetch answered besides the window: the tracks and the other parameters (a change
 *  of either, e.g. the ranks expanded or the clock alignment, needs a new request). */
function scopeOf(tracks: string, base: Params): string {
  return `${tracks}\u0000${JSON.stringify(base)}`;
}

/** The routes a timeline reads: slices (shaped as /timeline_slices answers) and counters
 *  (shaped as /timeline_counters answers; null: none). */
export interface TimelineRoutes {
  slices: 'timeline_slices' | 'timeline_rank_slices';
  counters: 'timeline_counters' | 'timeline_rank_counters' | null;
}

const ONE_TRACE: TimelineRoutes = { slices: 'timeline_slices', counters: 'timeline_counters' };

export function useTimelineData(base: Params, view: Window, plotWidth: number, tracks: string, routes: TimelineRoutes = ONE_TRACE): TimelineData {
  const [data, setData] = useState<TimelineData>({ slices: null, counters: null, error: '', requests: 0 });
  const latest = useRef({ base, view, plotWidth, tracks, routes });
  latest.current = { base, view, plotWidth, tracks, routes };
  const r = useRef({
    seq: 0,
    fetched: null as Fetched | null,
    controller: null as AbortController | null,
    timer: undefined as ReturnType<typeof setTimeout> | undefined,
    burstStart: 0,
    token: null as (() => void) | null,
    requests: 0,
  });

  const release = () => {
    const s = r.current;
    const token = s.token;
    s.token = null;
    token?.();
  };

  const issue = () => {
    const s = r.current;
    s.timer = undefined;
    s.burstStart = 0;
    const { base: b, view: v, plotWidth: px, tracks: tr, routes: rt } = latest.current;
    const width = v.end - v.start;
    const resolution = width / px;
    const want: Fetched = { start: v.start - width * PAD, end: v.end + width * PAD, resolution, tracks: scopeOf(tr, b) };
    const seq = ++s.seq;
    s.controller?.abort();
    const controller = new AbortController();
    s.controller = controller;
    s.requests += 1;
    const window = { start_us: want.start, end_us: want.end };
    let left = rt.counters ? 2 : 1;
    let failure = '';
    // Each reply is drawn as soon as it lands (slices usually first: counters cost the server
    // more); the work is done when both have.
    const settle = () => {
      left -= 1;
      if (left > 0 || seq !== s.seq) return;
      s.fetched = failure ? null : want;
      setData((old) => ({ ...old, error: failure, requests: s.requests }));
      release();
    };
    const fail = (error: unknown) => {
      if (!isAbort(error)) failure = describeError(error);
      if (isAbort(error) && seq !== s.seq) return;
      settle();
    };
    fetchJson<typeof rt.slices, TimelineSlicesReply>(rt.slices, { ...b, ...window, resolution_us: resolution, tracks: tr || null }, { signal: controller.signal })
      .then((reply) => {
        if (seq === s.seq) setData((old) => ({ ...old, slices: indexSlices(reply), requests: s.requests }));
        settle();
      }, fail);
    if (rt.counters) {
      fetchJson<typeof rt.counters, TimelineCountersReply>(rt.counters, { ...b, ...window, points: Math.min(5000, Math.max(10, Math.round((px * (1 + 2 * PAD)) / 2))) }, { signal: controller.signal })
        .then((reply) => {
          if (seq === s.seq) setData((old) => ({ ...old, counters: reply.counters }));
          settle();
        }, fail);
    }
  };

  // Layout effect: the work is counted before the browser paints the moved window.
  useLayoutEffect(() => {
    if (plotWidth <= 0) return;
    const s = r.current;
    const resolution = (view.end - view.start) / plotWidth;
    if (!s.timer && !s.token && covers(s.fetched, view, resolution, scopeOf(tracks, base))) {
      scheduleReady(); // nothing to fetch: still a new ready state for whoever waits on one
      return;
    }
    if (!s.token) s.token = beginWork();
    const now = performance.now();
    if (!s.burstStart) s.burstStart = now;
    clearTimeout(s.timer);
    s.timer = setTimeout(issue, now - s.burstStart >= MAX_WAIT_MS ? 0 : DEBOUNCE_MS);
  }, [view.start, view.end, plotWidth, tracks, JSON.stringify(base)]);

  useEffect(
    () => () => {
      const s = r.current;
      clearTimeout(s.timer);
      s.seq += 1;
      s.controller?.abort();
      release();
    },
    [],
  );
  return data;
}
