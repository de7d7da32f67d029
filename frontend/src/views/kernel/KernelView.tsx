// Kernel view: top-N pie of kernel time, Tensor Core share, grouping by name or name +
// operator + launch configuration, search by kernel and by operator, sortable table.

import { useMemo } from 'preact/hooks';
import type { TensorCoreShare, ViewProps } from '../../api/types';
import { typedRows, type QueryOf, type RowOf, type WireTableOf } from '../../api/tables';
import { useApi } from '../../api/useApi';
import { formatBandwidth, formatBytes, formatDuration, formatNumber, formatPct } from '../../base/format';
import { topSlices } from '../../components/charts/options';
import { Pie } from '../../components/charts/Pie';
import { kernelNameColumn } from '../../components/KernelName';
import { Card, Empty, Loaded } from '../../components/Status';
import { shortKernelNames } from '../../base/names';
import { DataTable, type Column } from '../../components/table/DataTable';
import { useUrlParam } from '../../components/useUrlParam';
import { TopNSelect, useTopN } from '../../components/TopNSelect';

type ByName = WireTableOf<'KernelsByNameTable'>;
type ByNameOp = WireTableOf<'KernelsByNameOpTable'>;
/** A row of either grouping: by name + operator + launch config adds the columns after `name`. */
type KernelRow = RowOf<'KernelsByNameTable'> & Partial<RowOf<'KernelsByNameOpTable'>>;

function isByNameOp(table: ByName | ByNameOp): table is ByNameOp {
  return table.columns[1] === 'operator';
}

export function KernelView(props: ViewProps) {
  const [groupBy, setGroupBy] = useUrlParam('group_by', 'name');
  const [topN, setTopN] = useTopN();
  const base = { run: props.run, worker: props.worker, span: props.span };
  const kernels = useApi<'kernels', ByName | ByNameOp>('kernels', { ...base, group_by: groupBy === 'name_op' ? 'name_op' : 'name' } satisfies QueryOf<'kernels'>);
  const share = useApi<'kernel_tensor_cores', TensorCoreShare>('kernel_tensor_cores', base);
  // torch.compile: the kernels Inductor generated, with the region and the ops they fused
  const generated = useApi<'compiled', WireTableOf<'CompiledKernelsTable'>>('compiled', { ...base, table: 'kernels' });
  // CUDA graphs: which kernels ran inside graph replays, and under which annotation
  const graphs = useApi<'cuda_graphs', { kernels: WireTableOf<'CudaGraphKernelsTable'>; annotations: WireTableOf<'CudaGraphAnnotationsTable'> }>('cuda_graphs', { ...base, tables: 'kernels,annotations' });
  const copies = useApi<'memcpy_summary', WireTableOf<'MemcpySummaryTable'>>('memcpy_summary', base satisfies QueryOf<'memcpy_summary'>);
  return (
    <div class="stack" data-testid="kernel">
      <div class="toolbar">
        <label>
          Group by
          <select data-control="group_by" value={groupBy === 'name_op' ? 'name_op' : 'name'} onChange={(e) => setGroupBy((e.target as HTMLSelectElement).value)}>
            <option value="name">Kernel</option>
            <option value="name_op">Kernel + operator + launch config</option>
          </select>
        </label>
        <TopNSelect value={topN} onChange={setTopN} />
      </div>
      <Loaded state={kernels}>
        {(table) => (
          <Kernels {...props} table={table} groupBy={groupBy === 'name_op' ? 'name_op' : 'name'} topN={topN} share={share.status === 'ok' ? share.data : null} shareError={share.status === 'error' ? share.error : ''} generated={generated.status === 'ok' ? generated.data : null} graphs={graphs.status === 'ok' ? graphs.data.kernels : null} graphAnnotations={graphs.status === 'ok' ? graphs.data.annotations : null} />
        )}
      </Loaded>
      {copies.status === 'ok' ? <MemoryCopies table={copies.data} name={`${props.run}_${props.worker}_${props.span}`} /> : null}
    </div>
  );
}

/** Memory copies per kind (direction and memory kinds) and device; shown when the trace has any. */
function MemoryCopies({ table, name }: { table: WireTableOf<'MemcpySummaryTable'>; name: string }) {
  const rows = useMemo(() => typedRows(table), [table]);
  if (!rows.length) return null;
  return (
    <Card title="Memory copies">
      <DataTable
        id="memory-copies"
        schema="MemcpySummaryTable"
        rows={rows}
        csvColumns={table.columns}
        csvName={`${name}_memcpy_summary.csv`}
        searches={[{ label: 'Search copies', keys: ['name'] }]}
        defaultSort={{ key: 'total_us', dir: 'desc' }}
        rowKey={(r) => `${r.name}|${r.device}`}
        caption="Pageable host memory is copied through a staging buffer at a fraction of a pinned copy's bandwidth (pin_memory=True)."
        columns={[
          { key: 'name', label: 'Copy' },
          { key: 'device', label: 'Device', numeric: true },
          { key: 'copies', label: 'Copies', numeric: true, format: (v) => formatNumber(v) },
          { key: 'total_us', label: 'Total', numeric: true, format: (v) => formatDuration(v) },
          { key: 'mean_us', label: 'Mean', numeric: true, format: (v) => formatDuration(v) },
          { key: 'total_bytes', label: 'Bytes', numeric: true, format: (v) => formatBytes(v) },
          { key: 'bandwidth_gbps', label: 'Bandwidth', numeric: true, format: (v) => formatBandwidth(v) },
          { key: 'time_pct', label: 'Share of copy time', numeric: true, format: (v) => formatPct(v) },
        ]}
      />
    </Card>
  );
}

function Kernels(props: ViewProps & { table: ByName | ByNameOp; groupBy: string; topN: number; share: TensorCoreShare | null; shareError: string; generated: WireTableOf<'CompiledKernelsTable'> | null; graphs: WireTableOf<'CudaGraphKernelsTable'> | null; graphAnnotations: WireTableOf<'CudaGraphAnnotationsTable'> | null }) {
  const { table, groupBy, topN, share, generated, graphs, graphAnnotations } = props;
  const graphRows = useMemo(() => (graphs ? typedRows(graphs) : []), [graphs]);
  // shown only when some graph kernel carries an annotation (torch.cuda._graph_annotations)
  const annotationRows = useMemo(() => {
    const all = graphAnnotations ? typedRows(graphAnnotations) : [];
    return all.some((r) => r.annotation) ? all : [];
  }, [graphAnnotations]);
  const rows = useMemo((): KernelRow[] => (isByNameOp(table) ? typedRows(table) : typedRows(table)), [table]);
  const generatedRows = useMemo(() => (generated ? typedRows(generated) : []), [generated]);
  const byOp = groupBy === 'name_op';
  const slices = useMemo(() => {
    // By launch configuration, the same kernel appears for several operators and shapes: the
    // operator and configuration come first, so the legend's two lines tell them apart.
    const short = shortKernelNames(rows.map((r) => String(r.name)));
    const name = (r: (typeof rows)[number]) => short.get(String(r.name)) ?? String(r.name);
    return topSlices(rows.map((r) => ({ name: byOp ? `${r.operator} · grid ${r.grid} block ${r.block} · ${name(r)}` : name(r), value: Number(r.total_us) || 0 })), topN);
  }, [rows, topN]);
  const tcSlices = useMemo(
    () => (share ? [{ name: `Using ${share.unit}`, value: share.tensor_cores_us }, { name: `Not using ${share.unit}`, value: share.other_us }].filter((s) => s.value > 0) : []),
    [share],
  );
  const us = (key: 'total_us' | 'mean_us' | 'max_us' | 'min_us', text: string): Column<KernelRow> => ({ key, label: text, numeric: true, format: (v) => formatDuration(v) });
  // only where some CUDA-graph kernel carries a torch.cuda._graph_annotations label
  const annotationColumn: Column<KernelRow>[] = rows.some((r) => r.graph_annotation)
    ? [{ key: 'graph_annotation', label: 'Graph annotation', title: 'torch.cuda._graph_annotations label of a kernel a CUDA graph ran' }]
    : [];
  const launchColumns: Column<KernelRow>[] = byOp
    ? [
        { key: 'operator', label: 'Operator' },
        ...annotationColumn,
        { key: 'grid', label: 'Grid' },
        { key: 'block', label: 'Block' },
        { key: 'registers_per_thread', label: 'Registers / thread', numeric: true },
        { key: 'shared_memory', label: 'Shared memory', numeric: true, format: (v) => formatBytes(v) },
      ]
    : [];
  const columns: Column<KernelRow>[] = [
    kernelNameColumn('name', 'Kernel', rows),
    ...launchColumns,
    { key: 'calls', label: 'Calls', numeric: true, format: (v) => formatNumber(v) },
    us('total_us', 'Total'),
    us('mean_us', 'Mean'),
    us('max_us', 'Max'),
    us('min_us', 'Min'),
    { key: 'mean_blocks_per_sm', label: 'Mean blocks / SM', numeric: true, format: (v) => formatNumber(v) },
    { key: 'mean_est_achieved_occupancy_pct', label: 'Mean est. occupancy', numeric: true, format: (v) => formatPct(v) },
    { key: 'tensor_cores_used', label: share?.unit ?? 'Tensor Cores', format: (v) => (v ? 'Yes' : 'No') },
  ];
  return (
    <>
      <div class="grid two">
        <Card>{slices.length ? <Pie title={`Kernel time (top ${topN})`} slices={slices} format={formatDuration} height={260} label="Kernel time pie" /> : <Empty>No kernels in this trace.</Empty>}</Card>
        <Card>
          {tcSlices.length ? (
            <Pie title={`Kernel time on ${share?.unit ?? 'Tensor Cores'}`} slices={tcSlices} format={formatDuration} height={260} label="Tensor Core pie" />
          ) : (
            <Empty>{props.shareError || 'No kernel time.'}</Empty>
          )}
          {share ? <div class="hint">{share.unit}: {formatPct(share.tensor_cores_pct)} of kernel time</div> : null}
        </Card>
      </div>
      <Card title="Kernels">
        <DataTable
          id="kernels"
          schema={byOp ? 'KernelsByNameOpTable' : 'KernelsByNameTable'}
          key={groupBy}
          rows={rows}
          columns={columns}
          csvColumns={table.columns}
          csvName={`${props.run}_${props.worker}_${props.span}_kernels_${groupBy}.csv`}
          searches={byOp ? [{ label: 'Search kernels', keys: ['name'] }, { label: 'Search operators', keys: ['operator'] }] : [{ label: 'Search kernels', keys: ['name'] }]}
          defaultSort={{ key: 'total_us', dir: 'desc' }}
          rowKey={(r) => `${r.name}|${r.operator ?? ''}|${r.graph_annotation ?? ''}|${r.grid ?? ''}|${r.block ?? ''}|${r.registers_per_thread ?? ''}|${r.shared_memory ?? ''}`}
        />
        {!byOp ? <div class="hint">Group by “Kernel + operator + launch config” to search by operator.</div> : null}
      </Card>
      {graphRows.length ? (
        <Card title="Ran inside CUDA graphs">
          <DataTable
            id="kernel-cuda-graphs"
            schema="CudaGraphKernelsTable"
            rows={graphRows}
            csvColumns={graphs!.columns}
            csvName={`${props.run}_${props.worker}_${props.span}_cuda_graph_kernels.csv`}
            searches={[{ label: 'Search kernels', keys: ['name'] }]}
            defaultSort={{ key: 'graph_us', dir: 'desc' }}
            rowKey={(r) => String(r.name)}
            caption="Kernels a graph launch (cudaGraphLaunch) ran; they count in every view like any other kernel, attributed to the launch's operator and step."
            columns={[
              kernelNameColumn('name', 'Kernel', graphRows),
              { key: 'graph_calls', label: 'Calls in graphs', numeric: true, format: (v) => formatNumber(v) },
              { key: 'calls', label: 'All calls', numeric: true, format: (v) => formatNumber(v) },
              { key: 'graph_us', label: 'Time in graphs', numeric: true, format: (v) => formatDuration(v) },
              { key: 'total_us', label: 'All time', numeric: true, format: (v) => formatDuration(v) },
            ]}
          />
        </Card>
      ) : null}
      {annotationRows.length ? (
        <Card title="CUDA-graph annotations">
          <DataTable
            id="kernel-cuda-graph-annotations"
            schema="CudaGraphAnnotationsTable"
            rows={annotationRows}
            csvColumns={graphAnnotations!.columns}
            csvName={`${props.run}_${props.worker}_${props.span}_cuda_graph_annotations.csv`}
            searches={[{ label: 'Search annotations', keys: ['annotation'] }]}
            defaultSort={{ key: 'device_us', dir: 'desc' }}
            rowKey={(r) => String(r.annotation)}
            caption="Graph kernels by the label torch.cuda._graph_annotations.mark_kernels gave them (merged into the trace by torch.cuda._annotate_cuda_graph_trace); empty: graph kernels without one. Streams are those the annotation assigned."
            columns={[
              { key: 'annotation', label: 'Annotation', format: (v) => (v ? String(v) : '—') },
              { key: 'kernel_names', label: 'Kernels', numeric: true, format: (v) => formatNumber(v) },
              { key: 'calls', label: 'Runs', numeric: true, format: (v) => formatNumber(v) },
              { key: 'device_us', label: 'Time', numeric: true, format: (v) => formatDuration(v) },
              { key: 'graph_pct', label: 'Share of graph time', numeric: true, format: (v) => formatPct(v) },
              { key: 'streams', label: 'Streams' },
            ]}
          />
        </Card>
      ) : null}
      {generatedRows.length ? (
        <Card title="Kernels in torch.compile regions">
          <DataTable
            id="kernel-inductor"
            schema="CompiledKernelsTable"
            rows={generatedRows}
            csvColumns={generated!.columns}
            csvName={`${props.run}_${props.worker}_${props.span}_inductor_kernels.csv`}
            searches={[{ label: 'Search kernels, origins, fused ops or regions', keys: ['kernel', 'origin', 'fused', 'region'] }]}
            rowKey={(r) => `${r.region}|${r.kernel}`}
            caption="Inductor's launch annotations (kernel_hash, kernel_file) tie each generated kernel to its compiled region; more in the Compiled tab."
            columns={[
              kernelNameColumn('kernel', 'Kernel', generatedRows),
              { key: 'origin', label: 'Origin' },
              { key: 'region', label: 'Region' },
              { key: 'fused', label: 'Fused ops', format: (v) => (v ? String(v) : '—') },
              { key: 'calls', label: 'Calls', numeric: true, format: (v) => formatNumber(v) },
              { key: 'device_us', label: 'Device', numeric: true, format: (v) => formatDuration(v) },
              { key: 'kernel_hash', label: 'Kernel hash', format: (v) => (v ? String(v) : '—') },
              { key: 'kernel_file', label: 'Kernel file', format: (v) => (v ? String(v) : '—') },
            ]}
          />
        </Card>
      ) : null}
    </>
  );
}
