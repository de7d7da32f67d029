// How many of a span's ranks a view over many ranks covers (the Job and Distributed views):
// the server's sentence, which names each rank whose trace did not load and why. Shown as a
// warning where some did not load, else as a quiet line.

import { typedRows, type WireTableOf } from '../api/tables';

export function RankCoverage({ text, missing }: { text: string; missing: WireTableOf<'MissingRanksTable'> }) {
  const rows = typedRows(missing);
  return (
    <div class={rows.length ? 'coverage warn' : 'coverage hint'} data-testid="rank-coverage" data-missing={rows.length}>
      <p>{text}</p>
    </div>
  );
}
