// A 202 reply (a profile still loading) in words: what the server is doing, and how far.

import type { LoadingReply } from './types';

/** The stage of a load in words, e.g. "Parsing the trace… 45%"; `subject` names what loads. */
export function loadingLabel(progress: LoadingReply, subject = 'the trace'): string {
  const stage = stageLabel(progress, progress.total ? 'the next trace' : subject);
  return progress.total ? `${progress.ready ?? 0} of ${progress.total} traces loaded · ${stage}` : stage;
}

function stageLabel(progress: LoadingReply, subject: string): string {
  const percent = stagePercent(progress);
  const done = percent === null ? '' : ` ${percent}%`;
  switch (progress.stage) {
    case 'queued':
      return `Waiting to load ${subject}…`;
    case 'reading':
      return `Reading ${subject}…${done}`;
    case 'building':
      return `Building the tables of ${subject}…`;
    case 'computing':
      return `Computing the view of ${subject}…`;
    default:
      return `Parsing ${subject}…${done}`;
  }
}

/** Whole percent of the stage done (reading the file, parsing its JSON), or null when the
 * server gives no fraction. */
function stagePercent(progress: LoadingReply): number | null {
  const fraction = progress.fraction;
  if (fraction === null || fraction === undefined || !Number.isFinite(fraction)) return null;
  return Math.floor(Math.min(Math.max(fraction, 0), 1) * 100);
}

/** Whole percent for a progress bar: of the stage (`stagePercent`), or for a view over
 * several traces of all of them (those loaded, plus the part of the one loading). */
export function loadingPercent(progress: LoadingReply): number | null {
  if (!progress.total) return stagePercent(progress);
  const current = (stagePercent(progress) ?? 0) / 100;
  return Math.floor((Math.min((progress.ready ?? 0) + current, progress.total) / progress.total) * 100);
}
