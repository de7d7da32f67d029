// Loading and error states shared by every view. Server text is rendered as text.

import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { whenReady } from '../base/ready';
import { setParams } from '../base/url';
import { useUrlParam } from './useUrlParam';
import { loadingLabel, loadingPercent } from '../api/progress';
import type { LoadingReply } from '../api/types';
import type { ApiState } from '../api/useApi';

/** A spinner and `label`; with the server's progress of a profile load (`subject` names the
 * profile), its stage, elapsed time and, while parsing, a bar of how much is read. */
export function Loading({ label = 'Loading…', progress, subject }: { label?: string; progress?: LoadingReply | null; subject?: string }) {
  const percent = progress ? loadingPercent(progress) : null;
  const seconds = progress?.elapsed_seconds;
  return (
    <div class="status loading" role="status" aria-live="polite">
      <span class="spinner" aria-hidden="true" />
      {progress ? loadingLabel(progress, subject) : label}
      {seconds !== null && seconds !== undefined ? ` (${seconds.toFixed(0)} s)` : ''}
      {percent !== null ? (
        <div class="progress" data-progress={percent}>
          <div class="bar" style={{ width: `${percent}%` }} />
        </div>
      ) : null}
    </div>
  );
}

export function ErrorBox({ title = 'Could not load this view', reason }: { title?: string; reason: string }) {
  return (
    <div class="status error" role="alert">
      <strong>{title}</strong>
      <div class="reason">{reason}</div>
    </div>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="status empty">{children}</div>;
}

/** Render `children(data)` once `state` is ok; loading and error states otherwise (the error
 *  under `errorTitle`, which says what could not be loaded). */
export function Loaded<T>({ state, label, errorTitle, children }: { state: ApiState<T>; label?: string; errorTitle?: string; children: (data: T) => ComponentChildren }) {
  if (state.status === 'error') return <ErrorBox title={errorTitle} reason={state.error} />;
  if (state.status === 'loading') {
    return <Loading label={label} progress={state.progress} />;
  }
  return <>{children(state.data)}</>;
}

/** A panel of a view. A `panel` name makes it a target of links (a recommendation's
 *  evidence): opened with `panel=<name>` in the URL, it scrolls into view and is highlighted
 *  for a moment, and the parameter is dropped (the link has landed). */
export function Card({ title, children, class: className, panel }: { title?: string; children: ComponentChildren; class?: string; panel?: string }) {
  const box = useRef<HTMLElement>(null);
  const [target] = useUrlParam('panel', '');
  const [lit, setLit] = useState(false);
  useEffect(() => {
    if (!panel || target !== panel) return;
    return whenReady(() => {
      box.current?.scrollIntoView({ block: 'start' });
      setLit(true);
      setParams({ panel: null });
    });
  }, [panel, target]);
  useEffect(() => {
    if (!lit) return;
    const off = setTimeout(() => setLit(false), 2500);
    return () => clearTimeout(off);
  }, [lit]);
  return (
    <section ref={box} class={`card ${className ?? ''}${lit ? ' landed' : ''}`} data-panel={panel}>
      {title ? <h2>{title}</h2> : null}
      {children}
    </section>
  );
}
