// Compiled view (torch.compile): how much of the step ran inside compiled regions, one row per
// Dynamo frame compilation and AOTAutograd forward / backward, and the kernels Inductor
// generated for each region with what they fused. Shown only for traces with compiled regions.

import { useMemo } from 'preact/hooks';
import type { ViewProps } from '../../api/types';
import { typedRows, type WireTableOf } from '../../api/tables';
import { useApi } from '../../api/useApi';
import { formatDuration, formatNumber, formatPct } from '../../base/format';
import { Pie } from '../../components/charts/Pie';
import { kernelNameColumn } from '../../components/KernelName';
import { Card, Empty, Loaded } from '../../components/Status';
import { DataTable } from '../../components/table/DataTable';

interface CompiledReply {
  regions: WireTableOf<'CompiledRegionsTable'>;
  kernels: WireTableOf<'CompiledKernelsTable'>;
  share: WireTableOf<'CompiledShareTable'>;
}

export function CompiledView(props: ViewProps) {
  const state = useApi<'compiled', CompiledReply>('compiled', { run: props.run, worker: props.worker, span: props.span });
  return (
    <div class="stack" data-testid="compiled">
      <Loaded state={state}>{(data) => <Compiled data={data} name={`${props.run}_${props.worker}_${props.span}`} />}</Loaded>
    </div>
  );
}

function Compiled({ data, name }: { data: CompiledReply; name: string }) {
  const regions = useMemo(() => typedRows(data.regions), [data]);
  const kernels = useMemo(() => typedRows(data.kernels), [data]);
  const share = useMemo(() => typedRows(data.share)[0], [data]);
  const slices = useMemo(() => [{ name: 'Compiled', value: Number(share?.compiled_us) || 0 }, { name: 'Eager', value: Number(share?.eager_us) || 0 }], [share]);
  // columns of either table: a key it lacks, or whose cells are not numbers, is a type error where listed
  const us = <K extends string>(key: K, label: string) => ({ key, label, numeric: true, format: (v: number | null) => formatDuration(v) });
  const count = <K extends string>(key: K, label: string, title?: string) => ({ key, label, title, numeric: true, format: (v: number | null) => formatNumber(v) });
  return (
    <>
      <div class="grid two">
        <Card title="Compiled vs eager">
          <dl class="kv">
            <dt>Step time in compiled regions</dt>
            <dd data-field="compiled_pct">{formatPct(share?.compiled_pct)}</dd>
            <dt>Compiled</dt>
            <dd>{formatDuration(share?.compiled_us)}</dd>
            <dt>Eager</dt>
            <dd>{formatDuration(share?.eager_us)}</dd>
            <dt>Regions</dt>
            <dd>{formatNumber(share?.regions)}</dd>
            <dt>Recompiled frames</dt>
            <dd data-field="recompiled_frames">{formatNumber(share?.recompiled_frames)}</dd>
          </dl>
          <p class="hint">
            Host time of the profiled steps inside <code>Torch-Compiled Region</code> and <code>CompiledFunctionBackward</code>; a frame that ran
            a compilation other than its first (<code>0/1</code>, ...) was recompiled.
          </p>
        </Card>
        <Card>{Number(share?.total_us) > 0 ? <Pie title="Step time (all profiled steps)" slices={slices} format={formatDuration} height={260} label="Compiled vs eager" /> : <Empty>No steps recorded.</Empty>}</Card>
      </div>
      <Card title="Compiled regions" panel="regions">
        <DataTable
          id="compiled-regions"
          schema="CompiledRegionsTable"
          rows={regions}
          csvColumns={data.regions.columns}
          csvName={`${name}_compiled_regions.csv`}
          searches={[{ label: 'Search regions or kernels', keys: ['region', 'kernels'] }]}
          rowKey={(r) => String(r.region)}
          columns={[
            { key: 'region', label: 'Region' },
            { key: 'kind', label: 'Kind' },
            { key: 'compile_id', label: 'Compile id', format: (v) => (v ? String(v) : '—'), secondary: true },
            count('calls', 'Calls'),
            us('host_total_us', 'Host total'),
            us('device_total_us', 'Device total'),
            count('kernel_count', 'Device kernels'),
            { ...count('inductor_kernel_calls', 'Inductor kernel calls', 'Calls of generated kernels (triton_*, cpp_fused_*) recorded as ops'), secondary: true },
            { key: 'kernels', label: 'Kernels', format: (v) => (v ? String(v) : '—'), clamp: true },
          ]}
        />
      </Card>
      <Card title="Kernels in compiled regions">
        {kernels.length === 0 ? (
          <p class="hint" data-testid="no-kernels">
            No generated kernel is recorded in these regions. On GPU, Inductor's Triton launches are recorded by default; on CPU, set{' '}
            <code>torch._inductor.config.cpp.enable_kernel_profile = True</code> before compiling so each C++ kernel is recorded.
          </p>
        ) : null}
        <DataTable
          id="compiled-kernels"
          schema="CompiledKernelsTable"
          rows={kernels}
          csvColumns={data.kernels.columns}
          csvName={`${name}_compiled_kernels.csv`}
          searches={[{ label: 'Search kernels, origins, fused ops or regions', keys: ['kernel', 'origin', 'fused', 'region'] }]}
          rowKey={(r) => `${r.region}|${r.kernel}`}
          caption="Inductor's generated kernels, and the library kernels (cuBLAS, CUTLASS, ATen, ...) that its extern calls and eager ops ran inside the regions, each labelled by origin."
          columns={[
            { key: 'region', label: 'Region' },
            kernelNameColumn('kernel', 'Kernel', kernels),
            { key: 'origin', label: 'Origin' },
            { key: 'fused', label: 'Fused ops', format: (v) => (v ? String(v) : '—'), secondary: true },
            count('calls', 'Calls'),
            us('host_us', 'Host'),
            us('device_us', 'Device'),
            { key: 'kernel_hash', label: 'Kernel hash', format: (v) => (v ? String(v) : '—'), secondary: true },
            { key: 'kernel_file', label: 'Kernel file', format: (v) => (v ? String(v) : '—'), secondary: true },
          ]}
        />
      </Card>
    </>
  );
}
