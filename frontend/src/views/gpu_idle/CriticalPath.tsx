// Critical path panel of the GPU idle view: for one step, the chain of CPU work, launches,
// device activity and waits that decides its length (/critical_path): time per category, the
// operators with the most time on it, and the segments, each opening the Trace view on its
// range; "Show in Trace view" opens the step with the whole path drawn on the timeline.

import { useMemo } from 'preact/hooks';
import type { ViewProps } from '../../api/types';
import { typedRows, type RowOf, type TableName, type WireTableOf } from '../../api/tables';
import { useApi } from '../../api/useApi';
import { formatDuration, formatNumber, formatPct } from '../../base/format';
import { categoryColour, categoryLabel } from '../../components/criticalPath';
import { Pie } from '../../components/charts/Pie';
import { KernelName } from '../../components/KernelName';
import { Card, Loaded } from '../../components/Status';
import { DataTable, type Column } from '../../components/table/DataTable';
import type { Row } from '../../components/table/logic';
import { useUrlParam } from '../../components/useUrlParam';
import { showInTrace, showPathInTrace } from './link';

export function CriticalPath(props: ViewProps) {
  const base = { run: props.run, worker: props.worker, span: props.span };
  const steps = useApi<'steps', WireTableOf<'StepBreakdownTable'>>('steps', base);
  const numbers = useMemo(() => (steps.status === 'ok' ? typedRows(steps.data).map((r) => String(r.step)) : []), [steps]);
  const [stepParam, setStep] = useUrlParam('path_step', '');
  const step = numbers.includes(stepParam) ? stepParam : numbers[0];
  const query = step !== undefined ? { ...base, step } : null;
  const categories = useApi<'critical_path', WireTableOf<'CriticalPathCategoriesTable'>>(query ? 'critical_path' : null, { ...query, table: 'categories' });
  const operators = useApi<'critical_path', WireTableOf<'CriticalPathOperatorsTable'>>(query ? 'critical_path' : null, { ...query, table: 'operators' });
  const segments = useApi<'critical_path', WireTableOf<'CriticalPathTable'>>(query ? 'critical_path' : null, { ...query, table: 'segments' });
  const operatorRows = useMemo(() => (operators.status === 'ok' ? typedRows(operators.data) : []), [operators]);
  const segmentRows = useMemo(() => (segments.status === 'ok' ? typedRows(segments.data) : []), [segments]);
  const pie = useMemo(() => {
    if (categories.status !== 'ok') return null;
    const shown = typedRows(categories.data).filter((r) => r.time_us > 0);
    return {
      slices: shown.map((r) => ({ name: categoryLabel(r.category), value: r.time_us })),
      // the colours the Trace view draws the path in
      colors: shown.map((r) => categoryColour(r.category)),
    };
  }, [categories]);
  const name = `${props.run}_${props.worker}_${props.span}_critical_path_step${step}`;
  const pathKernels = useMemo(
    () => segmentRows.filter((r) => r.category === 'kernel').map((r) => r.name),
    [segmentRows],
  );
  const traceLink: Column<RowOf<'CriticalPathTable'>> = {
    key: 'start_us',
    label: 'Trace',
    format: (v, r) => (
      <button type="button" class="link-button" style={{ whiteSpace: 'nowrap' }} data-control="path-show-in-trace" onClick={() => showInTrace(r.start_us, r.end_us)}>
        {formatDuration(v)}
      </button>
    ),
  };
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
              rows={operatorRows}
              csvColumns={table.columns}
              name={`${name}_operators.csv`}
              columns={[
                { key: 'operator', label: 'Operator on the path' },
                { key: 'time_us', label: 'Time', numeric: true, format: (v) => formatDuration(v) },
                { key: 'share_pct', label: 'Share', numeric: true, format: (v) => formatPct(v) },
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
            rows={segmentRows}
            csvColumns={table.columns}
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
              { key: 'dur_us', label: 'Duration', numeric: true, format: (v) => formatDuration(v) },
              { key: 'evidence', label: 'Dependency', format: (v) => EVIDENCE[String(v)] ?? String(v) },
              traceLink,
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

function PathTable<R extends Row>({ id, schema, rows, csvColumns, name, columns, sortKey }: { id: string; schema: TableName; rows: R[]; csvColumns: string[]; name: string; columns: Column<R>[]; sortKey: string }) {
  return <DataTable id={id} schema={schema} rows={rows} columns={columns} csvColumns={csvColumns} csvName={name} defaultSort={{ key: sortKey, dir: 'desc' }} />;
}
