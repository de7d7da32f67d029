// The typed client of the plugin's routes. URLs are relative to the page
// (`./route?...` against document.baseURI), so TensorBoard's --path_prefix and proxies work.
// A 202 reply means the trace is still being parsed: `fetchJson` asks again until it is ready,
// reporting progress; a 4xx/5xx reply becomes an ApiError carrying the server's reason.

import type { ReplyOf, Route } from './tables';
import type { ErrorReply, LoadingReply } from './types';

export type Params = Record<string, string | number | null | undefined>;

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly reason: string,
    /** The file the error is about, relative to the log directory (as the run lists it). */
    readonly path: string | null = null,
  ) {
    super(reason);
  }
}

/** Absolute URL of a route with its non-empty parameters. */
export function routeUrl(route: string, params: Params = {}): string {
  const url = new URL(`./${route}`, document.baseURI);
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== '') url.searchParams.set(key, String(value));
  }
  return url.href;
}

export interface FetchOptions {
  signal?: AbortSignal;
  onLoading?: (reply: LoadingReply) => void;
  /** Delay between asks while the server answers 202, in ms. */
  pollMs?: number;
}

function wait(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(signal.reason ?? new DOMException('aborted', 'AbortError'));
    }, { once: true });
  });
}

async function errorOf(response: Response): Promise<ApiError> {
  let body: Partial<ErrorReply> = {};
  try {
    body = (await response.json()) as ErrorReply;
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, body.error ?? 'http_error', body.reason ?? `HTTP ${response.status} ${response.statusText}`, body.path ?? null);
}

/** GET a JSON route, waiting while the profile is being parsed; its reply typed by the route
 * (`ReplyOf`), or narrowed to one member of it (`T`). Every call to the API goes through it. */
export async function fetchJson<R extends Route, T extends ReplyOf<R> = ReplyOf<R>>(
  route: R, params: Params = {}, options: FetchOptions = {},
): Promise<T> {
  const url = routeUrl(route, params);
  let delay = options.pollMs ?? 500;
  for (;;) {
    const response = await fetch(url, { signal: options.signal, headers: { Accept: 'application/json' } });
    if (response.status === 202) {
      options.onLoading?.((await response.json()) as LoadingReply);
      await wait(delay, options.signal);
      delay = Math.min(delay * 1.5, 3000);
      continue;
    }
    if (!response.ok) throw await errorOf(response);
    return (await response.json()) as T;
  }
}

export function isAbort(error: unknown): boolean {
  return error instanceof DOMException && error.name === 'AbortError';
}

/** A message for people from any failure of fetchJson. */
export function describeError(error: unknown): string {
  if (error instanceof ApiError) return error.reason;
  if (error instanceof TypeError) return `Cannot reach the TensorBoard server (${error.message}).`;
  return error instanceof Error ? error.message : String(error);
}
