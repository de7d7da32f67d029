import { describe, expect, it } from 'vitest';
import type { fetchJson } from './client';
import { columnDoc, typedRows, type QueryOf, type ReplyOf, type RowOf, type WireTableOf } from './tables';

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

describe('the client typed by route', () => {
  it("types a reply by its route's OpenAPI entry", () => {
    const spans: ReplyOf<'spans'> = { run: 'r', worker: 'w', spans: [{ span: 1, stamp: null, file: 'a.json' }] };
    expect(spans.spans[0].span).toBe(1);
    // @ts-expect-error a reply without the fields its route declares required
    const partial: ReplyOf<'spans'> = { run: 'r' };
    expect(partial.run).toBe('r');
  });
});

// A page narrows a route's reply only to one of that route's replies (`useApi<R, T>`,
// `fetchJson<R, T>`): checked by tsc (npm run build), so a table another route answers is an error.
export type OneOfItsReplies = Parameters<typeof fetchJson<'steps', WireTableOf<'StepBreakdownTable'>>>;
// @ts-expect-error the step breakdown is not one of the kernels route's replies
export type NotOneOfItsReplies = Parameters<typeof fetchJson<'kernels', WireTableOf<'StepBreakdownTable'>>>;
// @ts-expect-error not a route
export type NoSuchRoute = ReplyOf<'no_such_route'>;
