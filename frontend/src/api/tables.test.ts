import { describe, expect, it } from 'vitest';
import { columnDoc, typedRows, type QueryOf, type RowOf, type WireTableOf } from './tables';

describe('typed tables', () => {
  it('turns a generated table into row objects typed by its columns', () => {
    // The columns must be the declared ones, in order: another list does not type-check.
    const table: WireTableOf<'TimelineStepsTable'> = { columns: ['step', 'start_us', 'end_us'], rows: [[3, 10.5, 20]] };
    const [row] = typedRows(table);
    const start: number = row.start_us;
    expect(start).toBe(10.5);
    expect(row).toEqual({ step: 3, start_us: 10.5, end_us: 20 });
    // @ts-expect-error a column the declaration does not have
    expect(row.begin_us).toBeUndefined();
  });

  it('keeps nullable columns nullable', () => {
    const memory: RowOf<'GpuSummaryTable'>['memory_bytes'] = null;
    const name: RowOf<'GpuSummaryTable'>['name'] = 'A100';
    expect([memory, name]).toEqual([null, 'A100']);
  });

  it("types a route's query parameters from its declaration", () => {
    // `kernels` is declared in tb_plugin/views/kernels.py with group_by: name | name_op.
    const query: QueryOf<'kernels'> = { run: 'r', worker: 'w', group_by: 'name_op' };
    // @ts-expect-error a choice the declaration does not have
    const wrong: QueryOf<'kernels'> = { run: 'r', worker: 'w', group_by: 'name_shape' };
    // @ts-expect-error a parameter the route does not take
    const extra: QueryOf<'lightning'> = { run: 'r', worker: 'w', group_by: 'name' };
    expect([query.group_by, wrong.run, extra.worker]).toEqual(['name_op', 'r', 'w']);
  });
});

describe('column definitions', () => {
  it('are the declarations\' meanings, with the unit, as openapi.yaml documents them', () => {
    expect(columnDoc('GpuSummaryTable', 'utilization_pct')).toBe('kernel-busy time / all-steps time (%)');
    expect(columnDoc('GpuSummaryTable', 'est_sm_efficiency_pct')).toMatch(/^time integral of min\(blocks per SM, 1\)/);
  });

  it('are missing for a column the table does not declare', () => {
    expect(columnDoc('GpuSummaryTable', 'total_us')).toBeUndefined();
  });
});
