// The shell: run list, run/worker/span selectors, view tabs and the selected view. The
// selection is kept in the page URL (base/url.ts); views fetch their own data.

import { useEffect, useRef, useState } from 'preact/hooks';
import { describeError, fetchJson } from '../api/client';
import type { RunInfo, RunsReply, SpansReply, ViewName } from '../api/types';
import { useApi } from '../api/useApi';
import { beginWork } from '../base/ready';
import { selectProfile, setParams } from '../base/url';
import { ErrorBox, Loading } from '../components/Status';
import { ThemeContext, useTheme } from '../components/theme';
import { useUrlParam } from '../components/useUrlParam';
import { RunList } from './RunList';
import { VIEWS } from './views';

/** Poll /runs: every second while something loads, every 5 s otherwise. */
function useRuns(): { reply: RunsReply | null; error: string; refresh: () => void } {
  const [reply, setReply] = useState<RunsReply | null>(null);
  const [error, setError] = useState('');
  const refresh = useRef<() => void>(() => undefined);
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let first: (() => void) | null = beginWork();
    const poll = async () => {
      let delay = 5000;
      try {
        const next = await fetchJson('runs');
        if (stopped) return;
        setReply(next);
        setError('');
        if (next.runs.some((r) => r.loading)) delay = 1000;
      } catch (err) {
        if (stopped) return;
        setError(describeError(err));
      }
      first?.();
      first = null;
      timer = setTimeout(poll, delay);
    };
    refresh.current = () => {
      clearTimeout(timer);
      timer = setTimeout(poll, 0);
    };
    poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
      first?.();
    };
  }, []);
  return { reply, error, refresh: () => refresh.current() };
}

export function App() {
  const theme = useTheme();
  const { reply, error, refresh } = useRuns();
  const [runParam] = useUrlParam('run', '');
  const [workerParam] = useUrlParam('worker', '');
  const [spanParam] = useUrlParam('span', '');
  const [viewParam] = useUrlParam('view', '');
  const runs = reply?.runs ?? [];

  const run: RunInfo | undefined = runParam ? runs.find((r) => r.name === runParam) : runs[0];
  const worker = run ? (run.workers.includes(workerParam) ? workerParam : run.workers[0]) : '';
  const spans = useApi<'spans', SpansReply>(run && worker ? 'spans' : null, { run: run?.name, worker });
  const spanList = spans.status === 'ok' ? spans.data.spans : [];
  const span = spanList.some((s) => String(s.span) === spanParam) ? Number(spanParam) : 1;
  const views = useApi<'views'>(run && worker && spans.status === 'ok' ? 'views' : null, { run: run?.name, worker, span });
  // Exactly the views the server lists as having data for this profile, in its order (the
  // declared one), and the memory snapshots listed with the run (declared last; /views never
  // lists them: a run may hold only snapshots, with no profile to open then).
  const hasSnapshots = (run?.snapshots.length ?? 0) > 0;
  const snapshotsOnly = hasSnapshots && run?.workers.length === 0;
  const available: ViewName[] = [
    ...(views.status === 'ok' ? views.data.views.filter((v) => v in VIEWS) : []),
    ...(hasSnapshots ? ['memory_snapshot' as ViewName] : []),
  ];
  const view = (available.includes(viewParam as ViewName) ? viewParam : snapshotsOnly ? 'memory_snapshot' : 'overview') as ViewName;
  const ready = views.status === 'ok' || snapshotsOnly;

  // A profile just opened: its run's load progress changed.
  useEffect(() => {
    if (views.status !== 'loading') refresh();
  }, [views.status, run?.name, worker, span]);

  // Write the effective selection back, so the URL always reopens what is on screen.
  useEffect(() => {
    if (!run) return;
    const values: Record<string, string | number> = { run: run.name, worker };
    if (spans.status === 'ok') values.span = span;
    if (ready) values.view = view;
    setParams(values);
  }, [run?.name, worker, span, view, spans.status, views.status, snapshotsOnly]);

  const select = (values: Record<string, string | number | null>) => selectProfile(values);
  const View = VIEWS[view]?.component;

  return (
    <ThemeContext.Provider value={theme}>
      <div class="layout">
        <header class="topbar">
          <h1>PyTorch Profiler</h1>
          <label>
            Run
            <select data-select="run" value={run?.name ?? ''} onChange={(e) => select({ run: (e.target as HTMLSelectElement).value, worker: null, span: null })}>
              {runs.map((r) => (
                <option key={r.name} value={r.name}>{r.name}</option>
              ))}
            </select>
          </label>
          <label>
            Worker
            <select data-select="worker" value={worker} disabled={snapshotsOnly} onChange={(e) => select({ worker: (e.target as HTMLSelectElement).value, span: null })}>
              {snapshotsOnly ? <option value="">none: memory snapshots only</option> : null}
              {(run?.workers ?? []).map((w) => (
                <option key={w} value={w}>{w}</option>
              ))}
            </select>
          </label>
          <label>
            Span
            <select data-select="span" value={spanList.length ? String(span) : ''} disabled={!spanList.length} onChange={(e) => select({ span: (e.target as HTMLSelectElement).value })}>
              {spanList.length ? null : <option value="">{snapshotsOnly ? 'none: memory snapshots only' : spans.status === 'error' ? 'none' : '…'}</option>}
              {spanList.map((s) => (
                <option key={s.span} value={String(s.span)} title={s.file}>{s.span}{s.stamp !== null ? ` · ${s.file}` : ''}</option>
              ))}
            </select>
          </label>
        </header>
        <RunList runs={runs} selected={run?.name ?? ''} scanError={reply?.scan_error ?? ''} skipped={reply?.scan_errors ?? []} onSelect={(name) => {
          select({ run: name, worker: null, span: null });
          // a run low in a long list was clicked with the page scrolled: show the run's tabs
          window.scrollTo({ top: 0 });
        }} />
        <main class="content">
          {error ? <ErrorBox title="Cannot list the runs" reason={error} /> : null}
          {!reply && !error ? <Loading label="Looking for runs…" /> : null}
          {reply && runParam && !run ? <ErrorBox title="Run not found" reason={`No run named “${runParam}” has been found (yet) under the log directory.`} /> : null}
          {spans.status === 'error' ? <ErrorBox reason={spans.error} /> : null}
          {views.status === 'loading' && run && !snapshotsOnly ? <Loading progress={views.progress} subject={`${run.name} / ${worker} span ${span}`} /> : null}
          {views.status === 'error' ? <ErrorBox title={`Cannot open ${run?.name} / ${worker} span ${span}`} reason={views.error} /> : null}
          {ready && run ? (
            <>
              <nav class="tabs" role="tablist" aria-label="Views">
                {available.map((name) => (
                  <button
                    type="button"
                    role="tab"
                    key={name}
                    data-view={name}
                    aria-selected={name === view}
                    class={name === view ? 'tab active' : 'tab'}
                    onClick={() => select({ view: name })}
                  >
                    {VIEWS[name].label}
                  </button>
                ))}
              </nav>
              <div class="view" data-current-view={view} key={`${run.name}|${worker}|${span}|${view}`}>
                {View ? <View run={run.name} worker={worker} span={span} runs={runs} /> : null}
              </div>
            </>
          ) : null}
        </main>
      </div>
    </ThemeContext.Provider>
  );
}
