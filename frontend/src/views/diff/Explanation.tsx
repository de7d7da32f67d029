// Why B's step time differs from A's, as the diff route explains it (tb_plugin/views/
// regression.py): the mean step time and its causes per step with each side's steps, medians
// and spreads and the noise rule's verdict; each cause's top contributors, each opening A's and
// B's Trace views at its representative call; the two operator trees matched node by node.
// Every number is the API's; the page only lays them out.

import { typedRows, type WireTableOf } from '../../api/tables';
import { formatDelta, formatDuration, formatNumber, formatPct, deltaSign } from '../../base/format';
import { Card, Empty } from '../../components/Status';
import { kernelNameColumn } from '../../components/KernelName';
import { DataTable } from '../../components/table/DataTable';
import { traceHref, type Profile } from './links';

export interface ExplanationTables {
  warnings: WireTableOf<'DiffWarningsTable'>;
  explanation: WireTableOf<'DiffExplanationTable'>;
  contributors: WireTableOf<'DiffContributorsTable'>;
  contributor_paths: WireTableOf<'DiffContributorPathsTable'>;
  tree: WireTableOf<'DiffTreeTable'>;
}

/** A change of time (B − A), coloured by its sign as shown (a change that rounds to zero is not). */
export function Delta({ us }: { us: number | null }) {
  const sign = deltaSign(us, formatDuration);
  return <span class={sign > 0 ? 'pos' : sign < 0 ? 'neg' : ''}>{formatDelta(us, formatDuration)}</span>;
}

/** The noise rule's verdict of a change (regression, improvement, or within noise). */
export function Verdict({ verdict }: { verdict: string }) {
  const text = verdict === 'noise' ? 'within noise' : verdict;
  return <span class={`diff-verdict ${verdict}`} data-verdict={verdict}>{text}</span>;
}

export function Explanation({ data, a, b, name }: { data: ExplanationTables; a: Profile; b: Profile; name: string }) {
  const warnings = typedRows(data.warnings);
  const causes = typedRows(data.explanation);
  const contributors = typedRows(data.contributors);
  const paths = typedRows(data.contributor_paths);
  const tree = typedRows(data.tree);
  const pathsOf = (r: { cause: string; part: string; name: string }) => paths.filter((p) => p.cause === r.cause && p.part === r.part && p.name === r.name);
  const step = causes.find((r) => r.cause === 'step_time');
  const nameOf = new Map(tree.map((t) => [t.node, t.name]));
  const parentOf = new Map(tree.map((t) => [t.node, t.parent]));
  /** A node's path from the root, as the matched tree names it (module > submodule > operator). */
  const pathOf = (node: number) => {
    const names: string[] = [];
    for (let n: number | undefined = node; n !== undefined && n >= 0; n = parentOf.get(n)) names.unshift(nameOf.get(n) ?? String(n));
    return names.join(' › ');
  };
  const href = (profile: Profile, ts: number | null, dur: number | null) => traceHref(window.location.href, profile, ts, dur);
  return (
    <>
      <Card title="Why the step time changed (per step, B − A)">
        {warnings.length ? (
          <ul class="diff-warnings" data-testid="diff-warnings">
            {warnings.map((w) => (
              <li key={w.kind} class="recommendation warning" data-kind={w.kind}>
                <strong>Read with care:</strong> {w.warning}
              </li>
            ))}
          </ul>
        ) : null}
        {step ? (
          <p class="diff-headline" data-testid="diff-headline">
            Mean step time <strong>{formatDuration(step.mean_us_a)}</strong> over {step.steps_a} steps of A →{' '}
            <strong>{formatDuration(step.mean_us_b)}</strong> over {step.steps_b} steps of B: <Delta us={step.mean_us_delta} /> ({formatPct(step.change_pct)}), <Verdict verdict={step.verdict} />.
          </p>
        ) : null}
        <DataTable
          id="diff-explanation"
          schema="DiffExplanationTable"
          rows={causes}
          csvColumns={data.explanation.columns}
          csvName={`${name}_explanation.csv`}
          rowKey={(r) => r.cause}
          columns={[
            { key: 'label', label: 'Cause' },
            { key: 'mean_us_delta', label: 'B − A', numeric: true, format: (v) => <Delta us={v} /> },
            { key: 'share_pct', label: 'Share of change', numeric: true, format: (v) => (v === null ? '' : formatPct(v)) },
            { key: 'mean_us_a', label: 'A mean', numeric: true, format: (v) => formatDuration(v) },
            { key: 'mean_us_b', label: 'B mean', numeric: true, format: (v) => formatDuration(v) },
            { key: 'median_us_a', label: 'A median ± spread', numeric: true, format: (v, r) => `${formatDuration(v)} ± ${formatDuration(r.spread_us_a)}` },
            { key: 'median_us_b', label: 'B median ± spread', numeric: true, format: (v, r) => `${formatDuration(v)} ± ${formatDuration(r.spread_us_b)}` },
            { key: 'verdict', label: 'Verdict', format: (v) => <Verdict verdict={v} /> },
          ]}
        />
        <div class="hint">
          The causes add up to the change of the mean step time. A change is a regression only when it exceeds the threshold (a share of A's mean step time) and the medians differ by more than twice each side's step-to-step spread (1.4826 × the median absolute deviation); otherwise it is within noise.
        </div>
      </Card>
      <Card title="Top contributors (per step)">
        {contributors.length ? (
          <DataTable
            id="diff-contributors"
            schema="DiffContributorsTable"
            rows={contributors}
            csvColumns={data.contributors.columns}
            csvName={`${name}_contributors.csv`}
            searches={[{ label: 'Search contributors', keys: ['name', 'operator', 'cause'] }]}
            rowKey={(r) => `${r.cause}/${r.part}/${r.node}/${r.name}`}
            details={{
              label: 'The operators (module paths) it ran under',
              has: (r) => r.paths > 1,
              render: (r) => (
                <ul class="contributor-paths" data-testid="contributor-paths">
                  {pathsOf(r).map((p) => (
                    <li key={p.node}>
                      <Delta us={p.delta_us} /> under {p.node >= 0 ? pathOf(p.node) : '(no operator)'} ({formatNumber(p.calls_a)} → {formatNumber(p.calls_b)} calls per step)
                    </li>
                  ))}
                </ul>
              ),
            }}
            columns={[
              { key: 'label', label: 'Cause' },
              { key: 'operator', label: 'Operator', format: (v, r) => (r.paths > 1 ? <span data-testid="contributor-operators">{v} and {r.paths - 1} more</span> : v) },
              { ...kernelNameColumn('name', 'Kernel / call / operator', contributors), wide: true },
              { key: 'delta_us', label: 'B − A', numeric: true, format: (v) => <Delta us={v} /> },
              { key: 'calls_a', label: 'Calls A', numeric: true, format: (v) => formatNumber(v) },
              { key: 'calls_b', label: 'Calls B', numeric: true, format: (v) => formatNumber(v) },
              { key: 'mean_us_a', label: 'Per call A', numeric: true, format: (v) => (v === null ? '' : formatDuration(v)) },
              { key: 'mean_us_b', label: 'Per call B', numeric: true, format: (v) => (v === null ? '' : formatDuration(v)) },
              {
                key: 'ts_us_a',
                label: 'In the traces',
                title: "Opens A's and B's Trace views (two windows, side by side) at each side's longest call, highlighted",
                format: (v, r) => {
                  const linkA = href(a, v, r.dur_us_a);
                  const linkB = href(b, r.ts_us_b, r.dur_us_b);
                  return (
                    <span class="trace-links">
                      {linkA ? <a href={linkA} target="diff_trace_a" data-testid="trace-link-a" title={`A, step ${r.step_a}`}>A ↗</a> : null}{' '}
                      {linkB ? <a href={linkB} target="diff_trace_b" data-testid="trace-link-b" title={`B, step ${r.step_b}`}>B ↗</a> : null}
                    </span>
                  );
                },
              },
            ]}
          />
        ) : (
          <Empty>No contributor changed.</Empty>
        )}
      </Card>
      <Card title="Module and operator tree, matched (per step)">
        <div class="hint">Operators matched by their path from the root, through the nn.Module frames of traces recorded with modules (module &gt; submodule &gt; operator); where names differ (another backend or library), the nodes meet at their lowest common ancestor, shown for added and removed nodes.</div>
        <DataTable
          id="diff-tree"
          schema="DiffTreeTable"
          rows={tree}
          tree={{ id: 'node', parent: 'parent' }}
          csvColumns={data.tree.columns}
          csvName={`${name}_tree.csv`}
          searches={[{ label: 'Search operators', keys: ['name'] }]}
          rowKey={(r) => String(r.node)}
          defaultSort={{ key: 'device_total_us_delta', dir: 'desc', magnitude: true }}
          columns={[
            { key: 'name', label: 'Module / operator', wide: true },
            {
              key: 'status',
              label: 'Match',
              format: (v, r) => (v === 'matched' ? '' : <span class={`match ${v}`} data-status={v}>{v}{r.matched_at >= 0 ? ` (meets at ${nameOf.get(r.matched_at) ?? r.matched_at})` : ''}</span>),
            },
            { key: 'device_total_us_delta', label: 'Device Δ', numeric: true, format: (v) => <Delta us={v} /> },
            { key: 'host_total_us_delta', label: 'Host Δ', numeric: true, format: (v) => <Delta us={v} /> },
            { key: 'device_total_us_a', label: 'Device A', numeric: true, format: (v) => formatDuration(v) },
            { key: 'device_total_us_b', label: 'Device B', numeric: true, format: (v) => formatDuration(v) },
            { key: 'host_total_us_a', label: 'Host A', numeric: true, format: (v) => formatDuration(v) },
            { key: 'host_total_us_b', label: 'Host B', numeric: true, format: (v) => formatDuration(v) },
            { key: 'calls_a', label: 'Calls A', numeric: true, format: (v) => formatNumber(v) },
            { key: 'calls_b', label: 'Calls B', numeric: true, format: (v) => formatNumber(v) },
          ]}
        />
      </Card>
    </>
  );
}
