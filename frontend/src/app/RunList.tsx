// The runs found so far, with load progress and per-run errors; a run that failed shows
// why, the others stay usable. What the scan skipped (a directory it cannot list or that is
// nested too deep) is listed below the runs, with the reason.

import { inReport } from '../api/client';
import type { RunInfo, ScanSkip } from '../api/types';
import { runHoldings } from './holdings';

export function RunList({
  runs,
  selected,
  onSelect,
  scanError,
  skipped,
}: {
  runs: RunInfo[];
  selected: string;
  onSelect: (run: string) => void;
  scanError: string;
  skipped: ScanSkip[];
}) {
  return (
    <nav class="run-list" aria-label="Runs">
      <h2>Runs</h2>
      {scanError ? <div class="status error" role="alert">{scanError}</div> : null}
      {runs.length === 0 && !scanError ? (
        <div class="hint">
          {inReport ? 'This report holds no run it can show.' : 'No runs found yet; the log directory is rescanned in the background.'}
        </div>
      ) : null}
      <ul>
        {runs.map((run) => {
          const pct = run.files ? Math.round((100 * run.loaded) / run.files) : 0;
          return (
            <li key={run.name} class={run.name === selected ? 'selected' : ''} data-run={run.name}>
              <button type="button" class="run-name" onClick={() => onSelect(run.name)} aria-current={run.name === selected}>
                {run.name}
              </button>
              <div class="run-meta">{runHoldings(run)}</div>
              {run.files ? (
                <>
                  <div class="progress" title={`${run.loaded} of ${run.files} trace files loaded`}>
                    <div class="bar" style={{ width: `${pct}%` }} />
                  </div>
                  <div class="run-meta">
                    {run.loaded}/{run.files} loaded{run.loading ? ' · loading…' : ''}
                  </div>
                </>
              ) : null}
              {run.snapshots.filter((s) => s.status === 'error').map((s) => (
                <div class="run-error error" key={`snapshot-${s.path}`}>
                  {s.name}: {s.reason}
                </div>
              ))}
              {run.errors.map((error) => (
                <div class="run-error error" key={`${error.worker}-${error.span}`}>
                  {error.worker} span {error.span}: {error.reason}
                </div>
              ))}
            </li>
          );
        })}
      </ul>
      {skipped.length ? (
        <details class="scan-skipped" data-testid="scan-skipped">
          <summary>
            {skipped.length} {skipped.length === 1 ? 'path' : 'paths'} not scanned
          </summary>
          <ul>
            {skipped.map((skip) => (
              <li key={skip.path} class="error" data-path={skip.path}>
                <code>{skip.path}</code>: {skip.reason}
              </li>
            ))}
          </ul>
        </details>
      ) : null}
    </nav>
  );
}
