// Critical path panel of the GPU idle view: for one step, the chain of CPU work, launches,
// device activity and waits that decides its length (/critical_path): time per category, the
// operators with the most time on it, and the segments, each opening the Trace view on its
// range; "Show in Trace view" opens the step with the whole path drawn on the timeline.

import { useMemo } from 'preact/hooks';
import type { ViewProps, WireTable } from '../../api/types';
import type { TableName } from '../../api/tables';
import { useApi } from '../../api/useApi';
import { formatDuration, formatNumber, formatPct } from '../../base/format';
import { categoryColour, categoryLabel } from '../../components/criticalPath';
import { Pie } from '../../components/charts/Pie';
import { KernelName } from '../../components/KernelName';
import { Card, Loaded } from '../../components/Status';
import { DataTable, type Column } from '../../components/table/DataTable';
import { rowsOf } from '../../components/table/logic';
import { useUrlParam } from '../../components/useUrlParam';
import { showInTrace, showPathInTrace } from './link';

export function CriticalPath(props: ViewProps) {
  const base = { run: props.run, worker: props.worker, span: props.span };
  const steps = useApi<WireTable>('steps', base);
  const numbers = useMemo(() => (steps.status === 'ok' ? rowsOf(steps.data).map((r) => String(r.step)) : []), [steps]);
  const [stepParam, setStep] = useUrlParam('path_step', '');
  const step = numbers.includes(stepParam) ? stepParam : numbers[0];
  const query = step !== undefined ? { ...base, step } : null;
  const categories = useApi<WireTable>(query ? 'critical_path' : null, { ...query, table: 'categories' });
  const operators = useApi<WireTable>(query ? 'critical_path' : null, { ...query, table: 'operators' });
  const segments = useApi<WireTable>(query ? 'critical_path' : null, { ...query, table: 'segments' });
  const pie = useMemo(() => {
    if (categories.status !== 'ok') return null;
    const shown = rowsOf(categories.data).filter((r) => Number(r.time_us) > 0);
    return {
      slices: shown.map((r) => ({ name: categoryLabel(String(r.category)), value: Number(r.time_us) })),
      // the colours the Trace view draws the path in
      colors: shown.map((r) => categoryColour(String(r.category))),
    };
  }, [categories]);
  const name = `${props.run}_${props.worker}_${props.span}_critical_path_step${step}`;
  const pathKernels = useMemo(
    () => (segments.status === 'ok' ? rowsOf(segments.data).filter((r) => r.category === 'kernel').map((r) => String(r.name)) : []),
    [segments],
  );
  const link = (startKey: string, endKey: string): Column => ({
    key: startKey,
    label: 'Trace',
    format: (v, r) => (
      <button type="button" class="link-button" style={{ whiteSpace: 'nowrap' }} data-control="path-show-in-trace" onClick={() => showInTrace(Number(r[startKey]), Number(r[endKey]))}>
        {formatDuration(v as number)}
      </button>
    ),
  });
  return (
    <Card title="Critical path of a step">
      <div class="toolbar">
        <label>
          Step
          <select data-control="path_step" value={step ?? ''} onChange={(e) => setStep((e.target as HTMLSelectElement).value)}>
            {numbers.map((n) => (
              <option value={n}>{n}</option>
            ))}
          </select>
        </label>
        {step !== undefined ? (
          <button
            type="button"
            data-control="path-open-trace"
            title="Open the step in the Trace view with its critical path drawn on the timeline's tracks"
            onClick={() => showPathInTrace(step)}
          >
            Show in Trace view
          </button>
        ) : null}
      </div>
      <div class="grid two">
        <Loaded state={categories}>{() => (pie ? <Pie title="Time on the critical path" slices={pie.slices} colors={pie.colors} format={formatDuration} height={280} label="Critical path categories" /> : null)}</Loaded>
        <Loaded state={operators}>
          {(table) => (
            <PathTable
              id="critical-path-operators"
              schema="CriticalPathOperatorsTable"
              table={table}
              name={`${name}_operators.csv`}
              columns={[
                { key: 'operator', label: 'Operator on the path' },
                { key: 'time_us', label: 'Time', numeric: true, format: (v) => formatDuration(v as number) },
                { key: 'share_pct', label: 'Share', numeric: true, format: (v) => formatPct(v as number) },
              ]}
              sortKey="time_us"
            />
          )}
        </Loaded>
      </div>
      <Loaded state={segments}>
        {(table) => (
          <PathTable
            id="critical-path-segments"
            schema="CriticalPathTable"
            table={table}
            name={`${name}_segments.csv`}
            columns={[
              { key: 'category', label: 'Category', format: (v) => categoryLabel(String(v)) },
              {
                key: 'name',
                label: 'Event',
                // a kernel by its short name (the full one a click away), as in the kernel tables
                format: (v, r) =>
                  r.category === 'kernel' ? <KernelName name={String(v)} names={pathKernels} /> : <span title={String(v)}>{String(v).length > 48 ? `${String(v).slice(0, 47)}…` : String(v)}</span>,
              },
              { key: 'operator', label: 'Operator' },
              { key: 'dur_us', label: 'Duration', numeric: true, format: (v) => formatDuration(v as number) },
              { key: 'evidence', label: 'Dependency', format: (v) => EVIDENCE[String(v)] ?? String(v) },
              link('start_us', 'end_us'),
            ]}
            sortKey="dur_us"
          />
        )}
      </Loaded>
      <div class="hint">
        Followed backwards from the step’s end along the dependency that was satisfied last: the previous work on a stream, a kernel’s launch call, the
        event another stream recorded, a CPU call blocked on the GPU, another CPU thread (such as the autograd thread during backward). The segments cover
        the whole step ({formatNumber(segments.status === 'ok' ? segments.data.rows.length : 0)} segments). “Dependency” says whether the trace recorded
        it (CUDA sync events) or it was inferred from timing (older traces).
      </div>
    </Card>
  );
}

/** The segments' `evidence` values, as the hint explains them. */
const EVIDENCE: Record<string, string> = { recorded: 'recorded', inferred: 'inferred from timing' };

function PathTable({ id, schema, table, name, columns, sortKey }: { id: string; schema: TableName; table: WireTable; name: string; columns: Column[]; sortKey: string }) {
  const rows = useMemo(() => rowsOf(table), [table]);
  return <DataTable id={id} schema={schema} rows={rows} columns={columns} csvColumns={table.columns} csvName={name} defaultSort={{ key: sortKey, dir: 'desc' }} />;
}
