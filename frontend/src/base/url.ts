// The selection lives in the page's query string (index.html?run=..&worker=..&span=..&view=..
// plus view options), so a link reopens the same view. Updated with history.replaceState: no
// reloads, no history entries per click. A tiny store: read, write, subscribe.

type Listener = () => void;
const listeners = new Set<Listener>();

export function getParam(name: string): string | null {
  return new URLSearchParams(window.location.search).get(name);
}

/** Set (or with null/'' remove) several parameters at once. */
export function setParams(values: Record<string, string | number | null | undefined>): void {
  const url = new URL(window.location.href);
  let changed = false;
  for (const [name, value] of Object.entries(values)) {
    const text = value === null || value === undefined ? '' : String(value);
    if ((url.searchParams.get(name) ?? '') === text) continue;
    changed = true;
    if (text === '') url.searchParams.delete(name);
    else url.searchParams.set(name, text);
  }
  if (!changed) return;
  window.history.replaceState(window.history.state, '', url.href);
  listeners.forEach((listener) => listener());
}

export function subscribe(listener: Listener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
