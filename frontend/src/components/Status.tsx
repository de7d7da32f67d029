// Loading and error states shared by every view. Server text is rendered as text.

import type { ComponentChildren } from 'preact';
import type { ApiState } from '../api/useApi';

export function Loading({ label = 'Loading…', seconds }: { label?: string; seconds?: number | null }) {
  return (
    <div class="status loading" role="status" aria-live="polite">
      <span class="spinner" aria-hidden="true" />
      {label}
      {seconds !== null && seconds !== undefined ? ` (${seconds.toFixed(0)} s)` : ''}
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

/** Render `children(data)` once `state` is ok; loading and error states otherwise. */
export function Loaded<T>({ state, label, children }: { state: ApiState<T>; label?: string; children: (data: T) => ComponentChildren }) {
  if (state.status === 'error') return <ErrorBox reason={state.error} />;
  if (state.status === 'loading') {
    return <Loading label={state.progress ? 'Parsing the trace…' : label} seconds={state.progress?.elapsed_seconds ?? null} />;
  }
  return <>{children(state.data)}</>;
}

export function Card({ title, children, class: className }: { title?: string; children: ComponentChildren; class?: string }) {
  return (
    <section class={`card ${className ?? ''}`}>
      {title ? <h2>{title}</h2> : null}
      {children}
    </section>
  );
}
