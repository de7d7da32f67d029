// How many of a span's ranks a view over many ranks covers (the Job and Distributed views),
// or of a run's memory snapshots the Memory snapshot comparison: the server's sentence, which
// names each rank whose trace (snapshot whose file) did not load and why. Shown as a warning
// where some did not load, else as a quiet line.

import { typedRows, type WireTableOf } from '../api/tables';

export function RankCoverage({ text, missing }: { text: string; missing: WireTableOf<'MissingRanksTable' | 'MissingSnapshotsTable'> }) {
  const rows = typedRows(missing);
  return (
    <div class={rows.length ? 'coverage warn' : 'coverage hint'} data-testid="rank-coverage" data-missing={rows.length}>
      <p>{text}</p>
    </div>
  );
}
