import { describe, expect, it } from 'vitest';
import { anyNonZero, compareCells, filterRows, hidingOrder, pageOf, rowsOf, shorten, sortRows, toCsv, treeRows, type Row } from './logic';

const table = {
  columns: ['name', 'calls', 'host_self_us', 'flag'],
  rows: [
    ['aten::add_', 62, 82.344, false],
    ['aten::mm', 4, 36.905, true],
    ['aten::empty', 104, null, false],
    ['Aten::Conv', 6, 1289.896, true],
  ],
};
const rows = rowsOf(table);

describe('rowsOf', () => {
  it('keys each row by column name', () => {
    expect(rows[0]).toEqual({ name: 'aten::add_', calls: 62, host_self_us: 82.344, flag: false });
    expect(rows).toHaveLength(4);
  });
});

describe('anyNonZero', () => {
  it('is true only when some row holds a non-zero number in one of the columns', () => {
    expect(anyNonZero(rows, ['host_self_us'])).toBe(true);
    expect(anyNonZero([{ a: 0, b: null }, { a: 0, b: 0 }], ['a', 'b'])).toBe(false);
    expect(anyNonZero([{ a: 0, b: -2 }], ['a', 'b'])).toBe(true);
    expect(anyNonZero(rows, ['missing'])).toBe(false);
    expect(anyNonZero([], ['a'])).toBe(false);
  });
});

describe('pageOf', () => {
  const list = Array.from({ length: 23 }, (_, i) => i);
  it('cuts pages and clamps the page number', () => {
    expect(pageOf(list, 0, 10)).toEqual({ rows: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], page: 0, pages: 3 });
    expect(pageOf(list, 2, 10)).toEqual({ rows: [20, 21, 22], page: 2, pages: 3 });
    expect(pageOf(list, 9, 10).page).toBe(2);
    expect(pageOf(list, -1, 10).page).toBe(0);
    expect(pageOf([], 0, 10)).toEqual({ rows: [], page: 0, pages: 1 });
  });
});

describe('sortRows', () => {
  it('sorts numbers numerically both ways with missing values last', () => {
    expect(sortRows(rows, { key: 'host_self_us', dir: 'desc' }).map((r) => r.name)).toEqual([
      'Aten::Conv', 'aten::add_', 'aten::mm', 'aten::empty',
    ]);
    expect(sortRows(rows, { key: 'host_self_us', dir: 'asc' }).map((r) => r.name)).toEqual([
      'aten::mm', 'aten::add_', 'Aten::Conv', 'aten::empty',
    ]);
  });
  it('sorts text case-insensitively and is stable', () => {
    expect(sortRows(rows, { key: 'name', dir: 'asc' }).map((r) => r.name)).toEqual([
      'aten::add_', 'Aten::Conv', 'aten::empty', 'aten::mm',
    ]);
    const tied = sortRows(rows, { key: 'flag', dir: 'asc' }).map((r) => r.name);
    expect(tied).toEqual(['aten::add_', 'aten::empty', 'aten::mm', 'Aten::Conv']);
  });
  it('sorts deltas by size, the largest change of either sign first', () => {
    const deltas: Row[] = [{ name: 'a', d: 5 }, { name: 'b', d: -40 }, { name: 'c', d: null }, { name: 'd', d: 12 }, { name: 'e', d: -1 }];
    expect(sortRows(deltas, { key: 'd', dir: 'desc', magnitude: true }).map((r) => r.name)).toEqual(['b', 'd', 'a', 'e', 'c']);
    expect(sortRows(deltas, { key: 'd', dir: 'asc', magnitude: true }).map((r) => r.name)).toEqual(['e', 'a', 'd', 'b', 'c']);
  });
  it('returns a copy and leaves the input alone', () => {
    const before = rows.map((r) => r.name);
    sortRows(rows, { key: 'calls', dir: 'asc' });
    expect(rows.map((r) => r.name)).toEqual(before);
    expect(sortRows(rows, null)).not.toBe(rows);
  });
  it('compares mixed cells sensibly', () => {
    expect(compareCells(2, 10)).toBeLessThan(0);
    expect(compareCells('b', 'A')).toBeGreaterThan(0);
    expect(compareCells(null, 1)).toBeGreaterThan(0);
    expect(compareCells(Number.NaN, Number.NaN)).toBe(0);
  });
});

describe('filterRows', () => {
  it('matches every word case-insensitively in the chosen columns only', () => {
    expect(filterRows(rows, 'ATEN M', ['name']).map((r) => r.name)).toEqual(['aten::mm', 'aten::empty']);
    expect(filterRows(rows, '62', ['name'])).toEqual([]);
    expect(filterRows(rows, '62', ['name', 'calls']).map((r) => r.name)).toEqual(['aten::add_']);
    expect(filterRows(rows, '   ', ['name'])).toHaveLength(4);
  });
  it('treats regex characters literally', () => {
    expect(filterRows(rows, 'add_', ['name']).map((r) => r.name)).toEqual(['aten::add_']);
    expect(filterRows(rows, '.*', ['name'])).toEqual([]);
  });
});

describe('toCsv', () => {
  it('writes a header and the given rows in order, like pandas', () => {
    const shown = sortRows(filterRows(rows, 'aten', ['name']), { key: 'calls', dir: 'desc' });
    expect(toCsv(table.columns, shown)).toBe(
      'name,calls,host_self_us,flag\n' +
        'aten::empty,104,,False\n' +
        'aten::add_,62,82.344,False\n' +
        'Aten::Conv,6,1289.896,True\n' +
        'aten::mm,4,36.905,True\n',
    );
  });
  it('quotes commas, quotes, line breaks and edge spaces; never interprets markup', () => {
    const tricky: Row[] = [{ a: 'x, y', b: 'say "hi"' }, { a: 'two\nlines', b: '<script>alert(1)</script>' }, { a: ' pad', b: 'ok' }];
    expect(toCsv(['a', 'b'], tricky)).toBe(
      'a,b\n"x, y","say ""hi"""\n"two\nlines",<script>alert(1)</script>\n" pad",ok\n',
    );
  });
  it('writes only the header for no rows', () => {
    expect(toCsv(['a'], [])).toBe('a\n');
  });
});

describe('treeRows', () => {
  const tree = rowsOf({
    columns: ['id', 'parent', 'name', 'us'],
    rows: [
      [0, -1, 'Model', 100],
      [1, 0, 'Encoder', 30],
      [2, 0, 'Decoder', 60],
      [3, 2, 'Linear', 50],
      [4, 1, 'Embedding', 20],
    ],
  });
  const spec = { id: 'id', parent: 'parent' };
  const names = (list: ReturnType<typeof treeRows>) => list.map((t) => `${'.'.repeat(t.level)}${t.row.name}`);

  it('orders depth-first with siblings sorted', () => {
    expect(names(treeRows(tree, spec, { key: 'us', dir: 'desc' }, '', ['name'], new Set()))).toEqual([
      'Model', '.Decoder', '..Linear', '.Encoder', '..Embedding',
    ]);
    expect(names(treeRows(tree, spec, { key: 'name', dir: 'asc' }, '', ['name'], new Set()))).toEqual([
      'Model', '.Decoder', '..Linear', '.Encoder', '..Embedding',
    ]);
  });
  it('hides the children of collapsed nodes', () => {
    const out = treeRows(tree, spec, null, '', ['name'], new Set([2]));
    expect(names(out)).toEqual(['Model', '.Encoder', '..Embedding', '.Decoder']);
    expect(out[3]).toMatchObject({ hasChildren: true, expanded: false });
  });
  it('shows matches with their ancestors when searching', () => {
    expect(names(treeRows(tree, spec, null, 'linear', ['name'], new Set([0])))).toEqual(['Model', '.Decoder', '..Linear']);
  });
  it('survives a cycle', () => {
    const cyclic = rowsOf({ columns: ['id', 'parent', 'name'], rows: [[1, 2, 'a'], [2, 1, 'b'], [3, -1, 'root']] });
    expect(names(treeRows(cyclic, spec, null, '', ['name'], new Set()))).toEqual(['root']);
  });
});

describe('hidingOrder / shorten', () => {
  it('hides secondary columns first, then numbers, then text, each from the right, keeping the first two', () => {
    const cols = [{ key: 'name' }, { key: 'calls' }, { key: 'a', secondary: true }, { key: 'b', numeric: true }, { key: 'c', secondary: true }, { key: 'd' }, { key: 'e', numeric: true }];
    expect(hidingOrder(cols)).toEqual(['c', 'a', 'e', 'b', 'd']);
    expect(hidingOrder([{ key: 'name' }, { key: 'x' }])).toEqual([]);
  });
  it('keeps the start and the end of a long name, within the limit', () => {
    const path = 'torch/nn/modules/container.py(250): forward > torch/nn/modules/conv.py(456): _conv_forward';
    const short = shorten(path, 40);
    expect(short.length).toBe(40);
    expect(short.startsWith(path.slice(0, 24)) && short.endsWith('_conv_forward') && short.includes('…')).toBe(true);
    expect(shorten('short', 40)).toBe('short');
  });
});
