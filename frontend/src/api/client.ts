// The typed client of the plugin's routes. URLs are relative to the page
// (`./route?...` against document.baseURI), so TensorBoard's --path_prefix and proxies work.
// A 202 reply means the trace is still being parsed: `fetchJson` asks again until it is ready,
// reporting progress; a 4xx/5xx reply becomes an ApiError carrying the server's reason.

import { setParams } from '../base/url';
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

/** GET a JSON route, waiting while the profile is being parsed (in a report file: its
 * embedded answer, `embeddedAnswer`); its reply typed by the route (`ReplyOf`), or narrowed to
 * one member of it (`T`). Every call to the API goes through it. */
export async function fetchJson<R extends Route, T extends ReplyOf<R> = ReplyOf<R>>(
  route: R, params: Params = {}, options: FetchOptions = {},
): Promise<T> {
  if (report) return (await embeddedAnswer(await report, route, params)) as T;
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

// A report file (`python -m tb_plugin report`, tb_plugin/report.py) carries the server's
// answers in a <script id="tb-report-data"> block: gzipped JSON in base64, inflated here by the
// browser's DecompressionStream. Each answer is keyed by its route and query (`answerKey`, as
// report.py `answer_key` writes it); the Trace view's windows are answered by the embedded
// window that covers them finely enough. What the report does not hold is refused with a
// reason saying how to see it.

interface Embedded {
  answers: Record<string, [number, unknown]>;
  windows: { route: string; scope: string; start_us: number; end_us: number; resolution_us: number; key: string }[];
  location: Record<string, string>;
  notes: Record<string, string>;
}

const WINDOW_PARAMS = ['start_us', 'end_us', 'resolution_us', 'points', 'tracks'];

/** `[route, [[name, value], ...]]` as JSON, names sorted, empty values left out. */
export function answerKey(route: string, params: Params): string {
  const pairs = Object.entries(params)
    .filter(([, value]) => value !== null && value !== undefined && value !== '')
    .map(([name, value]) => [name, String(value)])
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return JSON.stringify([route, pairs]);
}

const NOT_HELD = 'This report does not hold this answer (it holds what each tab shows on opening, with its choices). ';
const HOW_TO_SEE = 'To see it, open the run in TensorBoard: tensorboard --logdir DIR, then the PyTorch Profiler tab.';
const profileOf = (params: Params) => Object.fromEntries(['run', 'worker', 'span'].map((k) => [k, params[k]]));

/** The embedded answer of `route` to `params`: its reply, or its refusal as an ApiError. */
export function embeddedAnswer(data: Embedded, route: string, params: Params): unknown {
  let held = data.answers[answerKey(route, params)];
  if (!held && data.windows.some((w) => w.route === route)) {
    const scope = answerKey(route, Object.fromEntries(Object.entries(params).filter(([name]) => !WINDOW_PARAMS.includes(name))));
    const start = Number(params.start_us);
    const end = Number(params.end_us);
    const wanted = Number(params.resolution_us ?? 0) || (end - start) / Math.max(1, Number(params.points ?? 500));
    const windows = data.windows.filter((w) => w.route === route && w.scope === scope);
    // the widest window is the whole trace: a request reaching past it needs only what it holds
    const whole = windows.reduce((a, b) => (b.end_us - b.start_us > a.end_us - a.start_us ? b : a), windows[0]);
    const lo = whole ? Math.max(start, whole.start_us) : start;
    const hi = whole ? Math.min(end, whole.end_us) : end;
    const fits = windows.filter((w) => w.start_us <= lo && w.end_us >= hi && w.resolution_us <= wanted * 2);
    const best = fits.sort((a, b) => b.resolution_us - a.resolution_us)[0];
    if (best) held = data.answers[best.key];
    else if (whole) {
      const detail = data.notes[answerKey('timeline', profileOf(params))] ?? 'no step';
      throw new ApiError(404, 'not_in_report', `This report holds the whole trace zoomed out and ${detail} in full detail; `
        + 'zoom out, or open that step, or see this window in TensorBoard (tensorboard --logdir DIR).');
    }
  }
  if (!held) {
    // a route the report holds only some choices of says which (report.py `notes`)
    const note = data.notes[answerKey(route, profileOf(params))];
    throw new ApiError(404, 'not_in_report', (note ? `This report holds ${note}. ` : NOT_HELD) + HOW_TO_SEE);
  }
  const [status, body] = held;
  if (status === 200) return body;
  const reply = (body ?? {}) as Partial<ErrorReply>;
  throw new ApiError(status, reply.error ?? 'http_error', reply.reason ?? `HTTP ${status}`, reply.path ?? null);
}

async function inflate(text: string): Promise<Embedded> {
  const bytes = Uint8Array.from(atob(text.trim()), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return JSON.parse(await new Response(stream).text()) as Embedded;
}

/** What a report whose embedded answers cannot be read says, in place of every answer: the
 * file is damaged (cut short, edited, mangled by a mail or chat client), not a server away. */
export function damagedReport(error: unknown): ApiError {
  const detail = error instanceof Error ? error.message : String(error);
  return new ApiError(422, 'report_damaged', `This report file is damaged: its embedded answers cannot be read (${detail}). `
    + 'Write it again (python -m tb_plugin report RUN_OR_FILE -o report.html) and share the whole file.');
}

function openReport(): Promise<Embedded> | null {
  const element = typeof document === 'undefined' ? null : document.getElementById('tb-report-data');
  if (!element) return null;
  const data = inflate(element.textContent ?? '').catch((error: unknown) => {
    throw damagedReport(error);
  });
  // the report opens on the selection it was written for (a diff: its A and B); a damaged
  // one says so wherever an answer is asked for
  data.then((d) => {
    if (!window.location.search) setParams(d.location);
  }, () => undefined);
  return data;
}

const report = openReport();

/** True in a report file: answers come from the file, not a server. */
export const inReport = report !== null;
