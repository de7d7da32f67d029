// The app-ready signal tests wait on (never on sleeps): `document.body.dataset.ready` is
// "false" while any foreground request is in flight and becomes "true" two animation frames
// after the last one settled and the page re-rendered; `dataset.readySeq` counts the times it
// became ready, so a test can wait for the next ready state after an action.

let pending = 0;
let generation = 0;
let seq = 0;
let waiting: (() => void)[] = [];

/** Runs `callback` once the page is next ready (every request settled and rendered): a view
 *  whose panels grow as their data arrives is laid out by then. Returns a cancel function. */
export function whenReady(callback: () => void): () => void {
  waiting.push(callback);
  if (pending === 0) scheduleReady();
  return () => {
    waiting = waiting.filter((c) => c !== callback);
  };
}

function body(): HTMLElement | null {
  return typeof document === 'undefined' ? null : document.body;
}

function setBusy(): void {
  const el = body();
  if (el && el.dataset.ready !== 'false') el.dataset.ready = 'false';
}

/** Counts one foreground request until the returned function is called (once). */
export function beginWork(): () => void {
  pending += 1;
  generation += 1;
  setBusy();
  let done = false;
  return () => {
    if (done) return;
    done = true;
    pending -= 1;
    if (pending === 0) scheduleReady();
  };
}

/** Marks the page ready once nothing is pending (for views that fetch nothing). */
export function scheduleReady(): void {
  const mine = generation;
  const frame = typeof requestAnimationFrame === 'function' ? requestAnimationFrame : (f: () => void) => setTimeout(f, 16);
  frame(() =>
    frame(() => {
      if (pending !== 0 || mine !== generation) return;
      const el = body();
      if (!el) return;
      seq += 1;
      el.dataset.readySeq = String(seq);
      el.dataset.readyMs = String(Math.round(performance.now()));
      el.dataset.ready = 'true';
      const run = waiting;
      waiting = [];
      run.forEach((callback) => callback());
    }),
  );
}
