// The selection lives in the page's query string (index.html?run=..&worker=..&span=..&view=..
// plus view options), so a link reopens the same view. Updated with history.replaceState: no
// reloads, no history entries per click. A tiny store: read, write, subscribe.

type Listener = () => void;

/**
 * Selections made on one profile (run / worker / span): the Trace window, selected event,
 * expanded ranks (trace_rank_open: rank numbers of one run), the critical path drawn and its
 * selected segment (trace_path, trace_path_segment),
 * the Memory range, Diff's comparison (B, chosen relative to A) and the operator searched for
 * from an event. Times and event ids mean nothing in another profile, so the shell drops these
 * whenever the profile changes. View settings (group_by, top, device, trace_python, trace_q,
 * the Distributed step, trace_ranks) stay: each view checks them against the new profile's data (a step
 * number or device it does not have falls back to the default).
 */
export const PROFILE_SELECTIONS = ['trace_start_us', 'trace_end_us', 'trace_event', 'trace_rank_open', 'trace_path', 'trace_path_segment', 'start_us', 'end_us', 'run_b', 'worker_b', 'span_b', 'op_search', 'snapshot', 'entry'];
const PROFILE_KEYS = ['run', 'worker', 'span'];
const listeners = new Set<Listener>();

// Where the history refuses a changed query (a report shown in a notebook's `srcdoc` frame,
// whose about:srcdoc URL takes none), the selection is kept here instead.
let kept: URL | null = null;

function pageUrl(): URL {
  return new URL(kept?.href ?? window.location.href);
}

export function getParam(name: string): string | null {
  return pageUrl().searchParams.get(name);
}

/** Set (or with null/'' remove) several parameters at once. */
export function setParams(values: Record<string, string | number | null | undefined>): void {
  const url = pageUrl();
  let changed = false;
  for (const [name, value] of Object.entries(values)) {
    const text = value === null || value === undefined ? '' : String(value);
    if ((url.searchParams.get(name) ?? '') === text) continue;
    changed = true;
    if (text === '') url.searchParams.delete(name);
    else url.searchParams.set(name, text);
  }
  if (!changed) return;
  try {
    window.history.replaceState(window.history.state, '', url.href);
    kept = null;
  } catch {
    kept = url;
  }
  listeners.forEach((listener) => listener());
}

/** `setParams` for a change of run, worker or span: when the profile changes, the selections
 *  made on the old one (`PROFILE_SELECTIONS`) are removed in the same URL update, so no view
 *  of the new profile ever sees them. */
export function selectProfile(values: Record<string, string | number | null | undefined>): void {
  const changes = PROFILE_KEYS.some((key) => key in values && String(values[key] ?? '') !== (getParam(key) ?? ''));
  setParams(changes ? { ...values, ...Object.fromEntries(PROFILE_SELECTIONS.map((name) => [name, null])) } : values);
}

export function subscribe(listener: Listener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
