// Two runs of a job compared rank by rank (the diff_ranks route): each rank's mean step time in
// A's run and in B's, its verdict and largest cause, the rank that changed most first. A rank
// opens its own diff (A and B both that worker). Every number is the API's.

import { typedRows, type WireTableOf } from '../../api/tables';
import { useApi } from '../../api/useApi';
import { formatDuration, formatPct } from '../../base/format';
import { PROFILE_SELECTIONS, setParams } from '../../base/url';
import { Card, Loaded } from '../../components/Status';
import { DataTable } from '../../components/table/DataTable';
import { Delta, Verdict } from './Explanation';

export interface RanksPair {
  runA: string;
  spanA: number;
  runB: string;
  spanB: number;
  /** The worker whose diff is shown below. */
  worker: string;
  threshold: string;
}

/** The diff of `worker` in both runs, at the same spans: the other selections were A's. */
const openRank = (pair: RanksPair, worker: string) =>
  setParams({ ...Object.fromEntries(PROFILE_SELECTIONS.map((n) => [n, null])), worker, run_b: pair.runB, worker_b: worker, span_b: pair.spanB });

export function RankChanges({ pair }: { pair: RanksPair }) {
  const ranks = useApi<'diff_ranks', WireTableOf<'DiffRanksTable'>>('diff_ranks', { run: pair.runA, span: pair.spanA, run_b: pair.runB, span_b: pair.spanB, threshold_pct: pair.threshold });
  return (
    <Card title="Ranks, the one that changed most first (mean step time, B − A)">
      <Loaded state={ranks} label="Comparing every rank of both runs…">
        {(data) => {
          const rows = typedRows(data);
          return (
            <>
              <div class="hint">Each rank of run {pair.runA} (span {pair.spanA}) against the same rank of run {pair.runB} (span {pair.spanB}). Open a rank to see its diff below.</div>
              <DataTable
                id="diff-ranks"
                schema="DiffRanksTable"
                rows={rows}
                csvColumns={data.columns}
                csvName={`${pair.runA}_${pair.spanA}_vs_${pair.runB}_${pair.spanB}_ranks.csv`}
                searches={[{ label: 'Search ranks', keys: ['worker'] }]}
                rowKey={(r) => r.worker}
                defaultSort={{ key: 'mean_us_delta', dir: 'desc', magnitude: true }}
                columns={[
                  {
                    key: 'worker',
                    label: 'Rank',
                    format: (v) =>
                      v === pair.worker ? (
                        <strong data-current-rank="true">{v} (shown)</strong>
                      ) : (
                        <a href="#" data-testid="open-rank-diff" onClick={(e) => { e.preventDefault(); openRank(pair, v); }}>{v}</a>
                      ),
                  },
                  { key: 'mean_us_delta', label: 'B − A', numeric: true, format: (v) => <Delta us={v} /> },
                  { key: 'change_pct', label: 'Change', numeric: true, format: (v) => formatPct(v) },
                  { key: 'verdict', label: 'Verdict', format: (v) => <Verdict verdict={v} /> },
                  { key: 'top_cause_label', label: 'Largest cause' },
                  { key: 'top_cause_us', label: 'Its B − A', numeric: true, format: (v) => <Delta us={v} /> },
                  { key: 'mean_us_a', label: 'A mean', numeric: true, format: (v) => formatDuration(v) },
                  { key: 'mean_us_b', label: 'B mean', numeric: true, format: (v) => formatDuration(v) },
                  { key: 'steps_a', label: 'Steps A', numeric: true },
                  { key: 'steps_b', label: 'Steps B', numeric: true },
                ]}
              />
            </>
          );
        }}
      </Loaded>
    </Card>
  );
}
