// The shared table: click a header to sort, type to search, download the rows shown as CSV
// (the rows the search keeps, in the order shown, with the API's column names and raw
// values, so the file equals `?format=csv` of the same route when nothing is filtered).
// Optional: a tree mode (hierarchical sort, expand/collapse) and expandable row details.

import type { ComponentChildren, VNode } from 'preact';
import { useMemo, useState } from 'preact/hooks';
import { filterRows, sortRows, toCsv, treeRows, type Cell, type Row, type SortState, type TreeSpec } from './logic';

/** A column of rows `R`: its `key` is one of R's columns and `format` gets that column's cell
 *  type, so with typed rows (`api/tables.typedRows`) a column the table does not have is a
 *  type error. */
export type Column<R extends Row = Row> = {
  [K in keyof R & string]: {
    key: K;
    label: string;
    /** Cell text; raw value otherwise. Return text, never HTML. */
    format?: (value: R[K], row: R) => ComponentChildren;
    numeric?: boolean;
    title?: string;
  };
}[keyof R & string];

export interface Search {
  label: string;
  keys: string[];
}

export interface DataTableProps<R extends Row = Row> {
  id: string;
  columns: Column<R>[];
  rows: R[];
  /** Columns of the CSV download, in order (default: the wire columns of the first row). */
  csvColumns?: string[];
  csvName: string;
  /** Search boxes (each filters on its columns); default one box over every column. */
  searches?: Search[];
  /** What the search boxes hold at first (e.g. from a link), in the order of `searches`. */
  initialQueries?: string[];
  defaultSort?: SortState | null;
  tree?: TreeSpec;
  /** Row details shown below a row when its toggle is clicked. */
  details?: { has: (row: R) => boolean; render: (row: R) => VNode; label?: string };
  rowKey?: (row: R) => string;
  pageSize?: number;
  caption?: ComponentChildren;
}

export function downloadText(name: string, text: string, type = 'text/csv'): void {
  const blob = new Blob([text], { type: `${type};charset=utf-8` });
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export function DataTable<R extends Row = Row>(props: DataTableProps<R>) {
  const { columns, rows, tree, details, pageSize = 100 } = props;
  // Every table can be searched: by default over all its columns.
  const searches = props.searches ?? [{ label: 'Search', keys: columns.map((c) => c.key) }];
  const [sort, setSort] = useState<SortState | null>(props.defaultSort ?? null);
  const [queries, setQueries] = useState<string[]>(() => searches.map((_, i) => props.initialQueries?.[i] ?? ''));
  const [collapsed, setCollapsed] = useState<Set<Cell>>(new Set());
  const [open, setOpen] = useState<Set<string>>(new Set());
  const [limit, setLimit] = useState(pageSize);
  const rowKey = props.rowKey ?? ((row: R) => JSON.stringify(row));

  const shown = useMemo(() => {
    if (tree) {
      const query = queries.join(' ');
      const keys = searches.flatMap((s) => s.keys);
      return treeRows(rows, tree, sort, query, keys, collapsed);
    }
    let list = rows;
    searches.forEach((search, i) => {
      list = filterRows(list, queries[i] ?? '', search.keys);
    });
    return sortRows(list, sort).map((row) => ({ row, level: 0, hasChildren: false, expanded: false }));
  }, [rows, sort, queries, collapsed, tree]);

  const csvColumns = props.csvColumns ?? (rows.length ? Object.keys(rows[0]) : columns.map((c) => c.key));
  const onSort = (column: Column<R>) => {
    setSort((current) => {
      if (current?.key === column.key) return { key: column.key, dir: current.dir === 'asc' ? 'desc' : 'asc' };
      return { key: column.key, dir: column.numeric ? 'desc' : 'asc' };
    });
  };
  const toggle = (set: Set<any>, value: unknown, apply: (s: Set<any>) => void) => {
    const next = new Set(set);
    if (next.has(value)) next.delete(value);
    else next.add(value);
    apply(next);
  };

  const visible = shown.slice(0, limit);
  return (
    <div class="data-table" data-table={props.id}>
      <div class="table-tools">
        {searches.map((search, i) => (
          <input
            key={search.label}
            type="search"
            class="table-search"
            placeholder={search.label}
            aria-label={search.label}
            value={queries[i]}
            onInput={(e) => {
              const next = queries.slice();
              next[i] = (e.target as HTMLInputElement).value;
              setQueries(next);
              setLimit(pageSize);
            }}
          />
        ))}
        <span class="row-count" data-row-count={shown.length}>
          {shown.length === rows.length ? `${rows.length} rows` : `${shown.length} of ${rows.length} rows`}
        </span>
        <button
          type="button"
          class="csv"
          title="Download the rows shown (all pages) as CSV"
          onClick={() => downloadText(props.csvName, toCsv(csvColumns, shown.map((s) => s.row)))}
        >
          Download CSV
        </button>
        {props.caption}
      </div>
      <div class="table-scroll">
        <table>
          <thead>
            <tr>
              {details ? <th class="expander-col" aria-label={details.label ?? 'Details'} /> : null}
              {columns.map((column) => (
                <th
                  key={column.key}
                  class={column.numeric ? 'num sortable' : 'sortable'}
                  title={column.title ?? 'Sort'}
                  aria-sort={sort?.key === column.key ? (sort.dir === 'asc' ? 'ascending' : 'descending') : 'none'}
                  onClick={() => onSort(column)}
                  data-sort-key={column.key}
                >
                  {column.label}
                  <span class="sort-mark" aria-hidden="true">
                    {sort?.key === column.key ? (sort.dir === 'asc' ? ' ▲' : ' ▼') : ''}
                  </span>
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {visible.map((entry, index) => {
              const key = rowKey(entry.row);
              const isOpen = open.has(key);
              const canOpen = details?.has(entry.row) ?? false;
              return [
                <tr key={key} class={isOpen ? 'open' : ''} data-row-index={index}>
                  {details ? (
                    <td class="expander-col">
                      {canOpen ? (
                        <button type="button" class="expander" aria-expanded={isOpen} title={details.label ?? 'Details'} onClick={() => toggle(open, key, setOpen)}>
                          {isOpen ? '▾' : '▸'}
                        </button>
                      ) : null}
                    </td>
                  ) : null}
                  {columns.map((column, ci) => (
                    <td key={column.key} class={`${column.numeric ? 'num' : ''}${ci === 0 ? ' first' : ''}`}>
                      {ci === 0 && tree ? (
                        <span class="tree-cell" style={{ paddingLeft: `${entry.level * 16}px` }}>
                          {entry.hasChildren ? (
                            <button
                              type="button"
                              class="expander"
                              aria-expanded={entry.expanded}
                              onClick={() => toggle(collapsed, entry.row[tree.id], setCollapsed)}
                            >
                              {entry.expanded ? '▾' : '▸'}
                            </button>
                          ) : (
                            <span class="expander-space" />
                          )}
                          {cellText(column, entry.row)}
                        </span>
                      ) : (
                        cellText(column, entry.row)
                      )}
                    </td>
                  ))}
                </tr>,
                isOpen && details ? (
                  <tr key={`${key}-details`} class="details-row">
                    <td colSpan={columns.length + 1}>{details.render(entry.row)}</td>
                  </tr>
                ) : null,
              ];
            })}
          </tbody>
        </table>
      </div>
      {shown.length > limit ? (
        <button type="button" class="more" onClick={() => setLimit(limit + pageSize * 5)}>
          Show more ({shown.length - limit} more rows)
        </button>
      ) : null}
      {shown.length === 0 ? <div class="status empty">No rows{rows.length ? ' match the search' : ''}.</div> : null}
    </div>
  );
}

function cellText<R extends Row>(column: Column<R>, row: R): ComponentChildren {
  const value = row[column.key];
  // `format` takes this column's cell type: the union of every column's would not type-check
  const format = column.format as ((value: Cell, row: R) => ComponentChildren) | undefined;
  if (format) return format(value ?? null, row);
  if (value === null || value === undefined) return '—';
  return String(value);
}
