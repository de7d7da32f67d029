// Where a diff contributor opens the Trace view: the profile of one side (its run, worker and
// span) at that side's representative call, the call highlighted as the Trace view's range.
// Pure (unit-tested in links.test.ts); the page opens A's and B's in two windows side by side.

export interface Profile {
  run: string;
  worker: string;
  span: number;
}

/** The page URL opening `profile`'s Trace view on [ts, ts + dur] µs (with a margin), the call
 *  itself highlighted; null when that side has no such call. Other selections of the current
 *  page (Diff's B, a Trace window) are dropped: they belong to another profile. */
export function traceHref(current: string, profile: Profile, ts: number | null, dur: number | null): string | null {
  if (ts === null || dur === null) return null;
  const url = new URL(current);
  const pad = Math.max(dur * 0.5, 10);
  const params = new URLSearchParams({
    run: profile.run,
    worker: profile.worker,
    span: String(profile.span),
    view: 'trace',
    trace_start_us: String(round(ts - pad)),
    trace_end_us: String(round(ts + dur + pad)),
    trace_range_start_us: String(round(ts)),
    trace_range_end_us: String(round(ts + dur)),
  });
  url.search = params.toString();
  return url.href;
}

const round = (us: number) => Math.round(us * 1000) / 1000;
