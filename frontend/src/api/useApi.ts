// A hook fetching one route for a view. A new selection aborts the request of the old one, so
// a late reply is never shown for a selection that changed meanwhile; each request counts
// towards the app-ready signal while in flight.

import { useLayoutEffect, useState } from 'preact/hooks';
import { beginWork } from '../base/ready';
import { ApiError, describeError, fetchJson, isAbort, type Params } from './client';
import type { ReplyOf, Route } from './tables';
import type { LoadingReply } from './types';

export type ApiState<T> =
  | { status: 'loading'; data: null; error: null; progress: LoadingReply | null }
  | { status: 'ok'; data: T; error: null; progress: null }
  | { status: 'error'; data: null; error: string; progress: null; /** the file it is about (ApiError.path) */ path: string | null };

const LOADING = { status: 'loading', data: null, error: null, progress: null } as const;

/** Fetch `route` with `params` (null route: wait); refetches when either changes. The reply is
 * typed by the route (`useApi<'kernels'>(...)` holds `ReplyOf<'kernels'>`), or narrowed to one
 * member of it (`T`, e.g. the one table a `table=` query asks for). */
export function useApi<R extends Route, T extends ReplyOf<R> = ReplyOf<R>>(route: R | null, params: Params = {}): ApiState<T> {
  const key = route === null ? '' : `${route}?${JSON.stringify(params)}`;
  const [state, setState] = useState<{ key: string; value: ApiState<T> }>({ key, value: LOADING });
  // Layout effect: the request is counted before the browser paints, so the ready signal
  // never flickers to "true" between a selection and its request.
  useLayoutEffect(() => {
    if (route === null) return undefined;
    const controller = new AbortController();
    const done = beginWork();
    setState({ key, value: LOADING });
    fetchJson<R, T>(route, params, {
      signal: controller.signal,
      onLoading: (progress) => setState({ key, value: { status: 'loading', data: null, error: null, progress } }),
    })
      .then((data) => setState({ key, value: { status: 'ok', data, error: null, progress: null } }))
      .catch((error) => {
        if (!isAbort(error)) {
          const path = error instanceof ApiError ? error.path : null;
          setState({ key, value: { status: 'error', data: null, error: describeError(error), progress: null, path } });
        }
      })
      .finally(done);
    return () => {
      controller.abort();
      done();
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key]);
  return state.key === key ? state.value : LOADING;
}
