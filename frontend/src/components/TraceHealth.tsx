// The Trace health card: what a trace gets wrong, as the server states it (`health` route,
// tb_plugin/views/health.py; per rank in /job's `health` table). Collapsed when the trace is
// clean (no finding but info ones), opened with the findings when it is not; the page only
// lists the rows the server sends.

import type { RowOf } from '../api/tables';
import { formatNumber } from '../base/format';
import { DataTable, type Column } from './table/DataTable';

type HealthRow = RowOf<'HealthTable'> & { rank?: number; worker?: string };

const SEVERITY_LABEL: Record<string, string> = {
  violation: 'rule broken',
  data_loss: 'data lost',
  warning: 'warning',
  info: 'info',
};

const COLUMNS: Column<HealthRow>[] = [
  { key: 'finding', label: 'Finding' },
  {
    key: 'severity',
    label: 'Severity',
    format: (v) => <span class={`health-severity ${String(v)}`} data-severity={String(v)}>{SEVERITY_LABEL[String(v)] ?? String(v)}</span>,
  },
  { key: 'count', label: 'Count', numeric: true, format: (v) => formatNumber(v) },
  { key: 'meaning', label: 'What it is' },
  { key: 'affects', label: 'Can affect' },
  { key: 'detail', label: 'For instance', secondary: true },
  { key: 'source', label: 'Found by', secondary: true },
];

const RANK_COLUMNS: Column<HealthRow>[] = [{ key: 'rank', label: 'Rank', numeric: true }, ...COLUMNS];

/** The card of one trace's findings (`rows`: the health route's), or of every rank's
 *  (`perRank`: /job's health table, one rank column more). */
export function TraceHealth({ rows, name, perRank = false, ranks }: { rows: HealthRow[]; name: string; perRank?: boolean; ranks?: number }) {
  // clean: no finding but info ones (views/health.py `is_clean`)
  const serious = rows.filter((r) => r.severity !== 'info');
  const clean = serious.length === 0;
  const headline = perRank
    ? clean
      ? `every rank is clean${ranks !== undefined ? ` (${ranks} ranks)` : ''}`
      : `not clean on rank ${[...new Set(serious.map((r) => r.rank))].join(', ')}`
    : clean
      ? 'clean'
      : `not clean: ${serious.map((r) => `${r.finding} × ${formatNumber(r.count)}`).join(', ')}`;
  return (
    <section class="card trace-health" data-testid="trace-health" data-clean={String(clean)} data-findings={String(rows.length)}>
      <details open={!clean}>
        <summary>
          <h2>Trace health</h2> <span class={clean ? 'health-headline clean' : 'health-headline'} data-testid="trace-health-headline">{headline}</span>
        </summary>
        {rows.length ? (
          <DataTable
            id={perRank ? 'job-health' : 'trace-health'}
            schema={perRank ? 'JobHealthTable' : 'HealthTable'}
            rows={rows}
            csvName={`${name}_health.csv`}
            rowKey={(r) => `${r.rank ?? ''}|${r.finding}`}
            columns={perRank ? RANK_COLUMNS : COLUMNS}
          />
        ) : null}
        <p class="hint">
          torch’s trace-validator rules (<code>torch.profiler._trace_validator</code>, same names and counts as its <code>validate_trace</code>),
          what the import repaired or dropped, and events outside the profiled session, skewed against their launch, overlapping on one stream
          or with an unpaired flow. Info findings lose nothing. The same from the command line: <code>python -m tb_plugin check TRACE</code>.
        </p>
      </details>
    </section>
  );
}
