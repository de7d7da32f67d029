// Table logic without DOM: sort, search, tree order and CSV of the rows a table shows.
// DataTable.tsx renders what these return; logic.test.ts checks them.

import type { Cell, Row } from '../../api/tables';

// The wire table's cells and row objects are the API layer's (api/tables.ts); re-exported for
// the table component's users, which import all of a table's logic from here.
export { rowsOf, type Cell, type Row } from '../../api/tables';
export type SortDir = 'asc' | 'desc';
export interface SortState {
  key: string;
  dir: SortDir;
  /** Order by |value| (Diff's deltas: the largest change of either sign first). */
  magnitude?: boolean;
}

/** Whether any row holds a non-zero number in any of `keys`: columns that are zero
 *  everywhere (device times of a CPU-only trace) say nothing and are left out of tables. */
export function anyNonZero(rows: readonly Row[], keys: readonly string[]): boolean {
  return rows.some((r) => keys.some((key) => Number(r[key]) > 0 || Number(r[key]) < 0));
}

/** Ascending order of two cells: numbers numerically, text case-insensitively, missing last. */
export function compareCells(a: Cell | undefined, b: Cell | undefined): number {
  const aMissing = a === null || a === undefined || (typeof a === 'number' && Number.isNaN(a));
  const bMissing = b === null || b === undefined || (typeof b === 'number' && Number.isNaN(b));
  if (aMissing || bMissing) return aMissing === bMissing ? 0 : aMissing ? 1 : -1;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b);
  const sa = String(a).toLowerCase();
  const sb = String(b).toLowerCase();
  return sa < sb ? -1 : sa > sb ? 1 : 0;
}

/** A sorted copy (stable); missing values stay last in both directions. */
export function sortRows<T extends Row>(rows: readonly T[], sort: SortState | null): T[] {
  const copy = rows.slice();
  if (!sort) return copy;
  const sign = sort.dir === 'asc' ? 1 : -1;
  return copy
    .map((row, index) => ({ row, index }))
    .sort((x, y) => {
      const a = magnitudeOf(x.row[sort.key], sort);
      const b = magnitudeOf(y.row[sort.key], sort);
      const aMissing = a === null || a === undefined;
      const bMissing = b === null || b === undefined;
      if (aMissing || bMissing) return aMissing === bMissing ? x.index - y.index : aMissing ? 1 : -1;
      return sign * compareCells(a, b) || x.index - y.index;
    })
    .map((entry) => entry.row);
}

function magnitudeOf(value: Cell | undefined, sort: SortState): Cell | undefined {
  return sort.magnitude && typeof value === 'number' ? Math.abs(value) : value;
}

/** The rows of page `page` (0-based, clamped to the last page) of `size` rows each, with
 *  the page actually shown and the number of pages (at least 1). */
export function pageOf<T>(rows: readonly T[], page: number, size: number): { rows: T[]; page: number; pages: number } {
  const pages = Math.max(1, Math.ceil(rows.length / size));
  const shown = Math.min(Math.max(0, Math.floor(page)), pages - 1);
  return { rows: rows.slice(shown * size, (shown + 1) * size), page: shown, pages };
}

/** Rows where every word of `query` occurs (case-insensitive) in one of the `keys` cells. */
export function filterRows<T extends Row>(rows: readonly T[], query: string, keys: readonly string[]): T[] {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) return rows.slice();
  return rows.filter((row) => {
    const text = keys.map((key) => (row[key] === null || row[key] === undefined ? '' : String(row[key]))).join('\u0000').toLowerCase();
    return words.every((word) => text.includes(word));
  });
}

function csvField(value: Cell | undefined): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'number' && !Number.isFinite(value)) return '';
  // pandas writes Python's True/False; keep the download comparable with ?format=csv.
  const text = typeof value === 'boolean' ? (value ? 'True' : 'False') : String(value);
  return /[",\r\n]/.test(text) || /^\s|\s$/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** RFC 4180 CSV (header line, "\n" line ends like pandas) of `rows`, in the given order. */
export function toCsv(columns: readonly string[], rows: readonly Row[]): string {
  const lines = [columns.map((c) => csvField(c)).join(',')];
  for (const row of rows) lines.push(columns.map((c) => csvField(row[c])).join(','));
  return `${lines.join('\n')}\n`;
}

export interface TreeSpec {
  id: string;
  parent: string;
}

export interface TreeRow<T extends Row = Row> {
  row: T;
  level: number;
  hasChildren: boolean;
  expanded: boolean;
}

/**
 * Depth-first order of a tree table: siblings sorted by `sort`, children of collapsed nodes
 * hidden. With a search `query`, the matching rows and their ancestors are shown, expanded.
 */
export function treeRows<T extends Row>(
  rows: readonly T[],
  spec: TreeSpec,
  sort: SortState | null,
  query: string,
  keys: readonly string[],
  collapsed: ReadonlySet<Cell>,
): TreeRow<T>[] {
  const byId = new Map<Cell, T>();
  for (const row of rows) byId.set(row[spec.id], row);
  const children = new Map<Cell, T[]>();
  const roots: T[] = [];
  for (const row of rows) {
    const parent = row[spec.parent];
    if (parent !== null && parent !== undefined && byId.has(parent) && parent !== row[spec.id]) {
      const list = children.get(parent) ?? [];
      list.push(row);
      children.set(parent, list);
    } else {
      roots.push(row);
    }
  }
  let visible: Set<Cell> | null = null;
  if (query.trim()) {
    visible = new Set();
    for (const row of filterRows(rows, query, keys)) {
      let current: T | undefined = row;
      const seen = new Set<Cell>();
      while (current && !seen.has(current[spec.id])) {
        seen.add(current[spec.id]);
        visible.add(current[spec.id]);
        current = byId.get(current[spec.parent]);
      }
    }
  }
  const out: TreeRow<T>[] = [];
  const walk = (level: number, list: readonly T[], seen: Set<Cell>) => {
    for (const row of sortRows(list, sort)) {
      const id = row[spec.id];
      if (seen.has(id)) continue; // a cycle in bad data must not hang the page
      if (visible && !visible.has(id)) continue;
      const kids = children.get(id) ?? [];
      const expanded = visible ? true : !collapsed.has(id);
      out.push({ row, level, hasChildren: kids.length > 0, expanded });
      if (expanded && kids.length) walk(level + 1, kids, new Set(seen).add(id));
    }
  };
  walk(0, roots, new Set());
  return out;
}

/** The keys of the columns a table too wide for its card hides, first to last: its secondary
 *  columns, then its numbers, then its text columns, each from the right; never its first
 *  column (what a row is) nor its second. Text goes last because text columns say what a row
 *  is (a collective's name, a CUDA-graph annotation, an operator): a row of numbers without
 *  them cannot be read, while one number less still leaves the row readable. */
export function hidingOrder(columns: readonly { key: string; secondary?: boolean; numeric?: boolean }[]): string[] {
  const rest = columns.slice(2).reverse();
  const text = rest.filter((c) => !c.secondary && !c.numeric);
  return [...rest.filter((c) => c.secondary), ...rest.filter((c) => !c.secondary && c.numeric), ...text].map((c) => c.key);
}

/** `text` cut to `limit` characters: its start and its end (where a path's file and a
 *  frame's function are), "…" between. */
export function shorten(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const head = Math.ceil((limit - 1) * 0.6);
  return `${text.slice(0, head)}…${text.slice(text.length - (limit - 1 - head))}`;
}
