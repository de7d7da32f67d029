// The shared table: click a header to sort, type to search, download the rows shown as CSV
// (the rows the search keeps, in the order shown, with the API's column names and raw
// values, so the file equals `?format=csv` of the same route when nothing is filtered).
// Optional: a tree mode (hierarchical sort, expand/collapse) and expandable row details.
//
// Every table of the page behaves the same way: pages of PAGE_SIZE rows (a pager above and
// below when there is more than one), in the page's own flow (no inner scroll box whose edge
// cuts rows in half); a table wider than its card scrolls sideways with a scrollbar kept
// at the bottom of the window while the table is on screen.

import type { ComponentChildren, VNode } from 'preact';
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { columnDoc, type TableName } from '../../api/tables';
import { plural } from '../../base/format';
import { filterRows, hidingOrder, pageOf, shorten, sortRows, toCsv, treeRows, type Cell, type Row, type SortState, type TreeSpec } from './logic';

export const PAGE_SIZE = 50;

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
    /** A note for the header's tooltip, after the column's declared meaning (`DataTableProps.schema`):
     *  what a click on the cell does, or the meaning of a column no declaration has. */
    title?: string;
    /** Long text that should not wrap into a narrow column (input shapes). */
    wide?: boolean;
    /** A list that can run to hundreds of names (a region's kernels): three lines at most,
     *  the whole text in the cell's tooltip, so one row never fills the page. */
    clamp?: boolean;
    /** A detail most readers skip: hidden first when the table is wider than its card
     *  (`logic.hidingOrder`), behind the table's "more columns" toggle. */
    secondary?: boolean;
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
  /** The declared table the rows are (its OpenAPI component): each header's tooltip is then
   *  the declaration's meaning of its column, the one the API documents. Required, so no
   *  table forgets it; null only for rows no declared table holds (each column's `title`
   *  then says what it means). */
  schema: TableName | null;
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
  const { columns, rows, tree, details } = props;
  // Every table can be searched: by default over all its columns.
  const searches = props.searches ?? [{ label: 'Search', keys: columns.map((c) => c.key) }];
  const [sort, setSort] = useState<SortState | null>(props.defaultSort ?? null);
  const [queries, setQueries] = useState<string[]>(() => searches.map((_, i) => props.initialQueries?.[i] ?? ''));
  const [collapsed, setCollapsed] = useState<Set<Cell>>(new Set());
  const [open, setOpen] = useState<Set<string>>(new Set());
  const [page, setPage] = useState(0);
  const rowKey = props.rowKey ?? ((row: R) => JSON.stringify(row));
  // Columns hidden so that the table fits its card, and whether the reader asked for all.
  const [fit, setFit] = useState({ hidden: 0, all: false });
  const order = useMemo(() => hidingOrder(columns), [columns]);
  const hidden = fit.all ? new Set<string>() : new Set(order.slice(0, fit.hidden));
  const shownColumns = columns.filter((c) => !hidden.has(c.key));
  const onOverflow = useCallback((overflow: boolean, widened: boolean) => {
    setFit((f) => {
      if (f.all) return f;
      if (widened && f.hidden) return { ...f, hidden: 0 }; // room again: measure from all columns
      return overflow && f.hidden < order.length ? { ...f, hidden: f.hidden + 1 } : f;
    });
  }, [order.length]);

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
    setPage(0);
  };
  const toggle = (set: Set<any>, value: unknown, apply: (s: Set<any>) => void) => {
    const next = new Set(set);
    if (next.has(value)) next.delete(value);
    else next.add(value);
    apply(next);
  };

  const current = pageOf(shown, page, PAGE_SIZE);
  const sortedBy = columns.find((c) => c.key === sort?.key);
  const pager = current.pages > 1 ? <Pager page={current.page} pages={current.pages} total={shown.length} onPage={setPage} /> : null;
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
              setPage(0);
            }}
          />
        ))}
        <span class="row-count" data-row-count={shown.length}>
          {shown.length === rows.length ? plural(rows.length, 'row') : `${shown.length.toLocaleString('en-US')} of ${plural(rows.length, 'row')}`}
        </span>
        <button
          type="button"
          class="csv"
          title="Download the rows shown (all pages) as CSV"
          onClick={() => downloadText(props.csvName, toCsv(csvColumns, shown.map((s) => s.row)))}
        >
          Download CSV
        </button>
        {fit.hidden > 0 ? (
          <button
            type="button"
            class="more-columns"
            data-control="more-columns"
            data-hidden={fit.all ? 0 : fit.hidden}
            title={fit.all ? 'Hide the columns that do not fit the card' : `Also show: ${columns.filter((c) => hidden.has(c.key)).map((c) => c.label).join(', ')}`}
            onClick={() => setFit((f) => ({ ...f, all: !f.all }))}
          >
            {fit.all ? 'Fewer columns' : `${plural(fit.hidden, 'more column')}`}
          </button>
        ) : null}
        {props.caption}
        {pager}
      </div>
      {sort?.magnitude && sortedBy ? (
        <div class="hint sort-note" data-sort-note={sort.key}>
          Sorted by the size of “{sortedBy.label}”, the largest change of either sign first; click a header to sort by another column.
        </div>
      ) : null}
      <SideScroll onOverflow={onOverflow}>
        <table>
          <thead>
            <tr>
              {details ? <th class="expander-col" aria-label={details.label ?? 'Details'} /> : null}
              {shownColumns.map((column) => {
                // the declared meaning of the column; a page note (what a click on the cell does) after it
                const declared = props.schema && columnDoc(props.schema, column.key);
                const definition = declared && column.title ? `${declared}\n${column.title}` : declared ?? column.title;
                return (
                <th
                  key={column.key}
                  class={`${column.numeric ? 'num ' : ''}${column.wide ? 'wide ' : ''}sortable${definition ? ' defined' : ''}`}
                  title={definition ?? (sort?.key === column.key && sort.magnitude ? 'Sorted by size of change; click to sort by value' : 'Click to sort')}
                  data-definition={definition}
                  aria-sort={sort?.key === column.key ? (sort.dir === 'asc' ? 'ascending' : 'descending') : 'none'}
                  onClick={() => onSort(column)}
                  data-sort-key={column.key}
                >
                  {column.label}
                  <span class="sort-mark" aria-hidden="true">
                    {sort?.key === column.key ? (sort.dir === 'asc' ? ' ▲' : ' ▼') : ''}
                    {sort?.key === column.key && sort.magnitude ? ' |Δ|' : ''}
                  </span>
                </th>
                );
              })}
            </tr>
          </thead>
          <tbody>
            {current.rows.map((entry, index) => {
              const key = rowKey(entry.row);
              const isOpen = open.has(key);
              const canOpen = details?.has(entry.row) ?? false;
              return [
                <tr key={key} class={isOpen ? 'open' : ''} data-row-index={current.page * PAGE_SIZE + index}>
                  {details ? (
                    <td class="expander-col">
                      {canOpen ? (
                        <button type="button" class="expander" aria-expanded={isOpen} title={details.label ?? 'Details'} onClick={() => toggle(open, key, setOpen)}>
                          {isOpen ? '▾' : '▸'}
                        </button>
                      ) : null}
                    </td>
                  ) : null}
                  {shownColumns.map((column, ci) => (
                    <td key={column.key} class={`${column.numeric ? 'num' : ''}${column.wide ? ' wide' : ''}${ci === 0 ? ' first' : ''}`}>
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
                    <td colSpan={shownColumns.length + 1}>{details.render(entry.row)}</td>
                  </tr>
                ) : null,
              ];
            })}
          </tbody>
        </table>
      </SideScroll>
      {pager ? <div class="table-tools bottom">{pager}</div> : null}
      {shown.length === 0 ? <div class="status empty">No rows{rows.length ? ' match the search' : ''}.</div> : null}
    </div>
  );
}

function Pager({ page, pages, total, onPage }: { page: number; pages: number; total: number; onPage: (page: number) => void }) {
  const first = page * PAGE_SIZE + 1;
  const last = Math.min(total, (page + 1) * PAGE_SIZE);
  return (
    <span class="pager" data-pager={`${page + 1}/${pages}`}>
      <button type="button" data-page="first" disabled={page === 0} onClick={() => onPage(0)} aria-label="First page">«</button>
      <button type="button" data-page="previous" disabled={page === 0} onClick={() => onPage(page - 1)} aria-label="Previous page">‹ Previous</button>
      <span class="page-label">
        {first.toLocaleString('en-US')}–{last.toLocaleString('en-US')} of {plural(total, 'row')} · page {page + 1} of {pages}
      </span>
      <button type="button" data-page="next" disabled={page === pages - 1} onClick={() => onPage(page + 1)} aria-label="Next page">Next ›</button>
      <button type="button" data-page="last" disabled={page === pages - 1} onClick={() => onPage(pages - 1)} aria-label="Last page">»</button>
    </span>
  );
}

/**
 * A box that scrolls its content sideways when wider than the card. Its own scrollbar is
 * hidden (and overlay scrollbars, as on macOS, show only while scrolling anyway); a drawn
 * rail below it, sticking to the bottom of the window while the table is on screen, shows
 * how much is off to the right and scrolls there (drag the thumb, click the rail; wheel and
 * trackpad scroll the table itself). `data-overflow` says whether there is anything to scroll.
 */
function SideScroll({ children, onOverflow }: { children: ComponentChildren; onOverflow?: (overflow: boolean, widened: boolean) => void }) {
  const box = useRef<HTMLDivElement>(null);
  const rail = useRef<HTMLDivElement>(null);
  const [size, setSize] = useState({ content: 0, view: 0, left: 0 });
  const lastView = useRef(0);
  const measure = () => {
    const el = box.current;
    if (!el || !el.clientWidth) return; // not laid out (a closed panel): nothing to measure
    setSize((old) => (old.content === el.scrollWidth && old.view === el.clientWidth && old.left === el.scrollLeft
      ? old : { content: el.scrollWidth, view: el.clientWidth, left: el.scrollLeft }));
    const widened = lastView.current > 0 && el.clientWidth > lastView.current + 1;
    lastView.current = el.clientWidth;
    onOverflow?.(el.scrollWidth > el.clientWidth + 1, widened);
  };
  // after every render: hiding a column changes the width without resizing the box
  useLayoutEffect(measure);
  useEffect(() => {
    const el = box.current;
    if (!el) return undefined;
    const observer = new ResizeObserver(measure);
    observer.observe(el);
    if (el.firstElementChild) observer.observe(el.firstElementChild);
    measure();
    return () => observer.disconnect();
  }, []);
  const overflow = size.content > size.view + 1;
  const scrollBy = (pixels: number) => {
    if (box.current) box.current.scrollLeft += pixels;
  };
  const onRail = (event: PointerEvent) => {
    const el = box.current;
    const track = rail.current;
    if (!el || !track || !overflow) return;
    const trackWidth = track.clientWidth;
    const perPixel = size.content / trackWidth;
    const thumbLeft = (el.scrollLeft / size.content) * trackWidth;
    const thumbRight = thumbLeft + (size.view / size.content) * trackWidth;
    const x = event.clientX - track.getBoundingClientRect().left;
    if (x < thumbLeft || x > thumbRight) {
      scrollBy((x < thumbLeft ? -1 : 1) * size.view * 0.9);
      return;
    }
    // Drag the thumb: the table follows the pointer.
    const startX = event.clientX;
    const startLeft = el.scrollLeft;
    track.setPointerCapture(event.pointerId);
    const move = (e: PointerEvent) => {
      el.scrollLeft = startLeft + (e.clientX - startX) * perPixel;
    };
    const up = () => {
      track.removeEventListener('pointermove', move);
      track.removeEventListener('pointerup', up);
      track.removeEventListener('pointercancel', up);
    };
    track.addEventListener('pointermove', move);
    track.addEventListener('pointerup', up);
    track.addEventListener('pointercancel', up);
    event.preventDefault();
  };
  const thumbWidth = overflow ? (100 * size.view) / size.content : 100;
  const thumbLeft = overflow ? (100 * size.left) / size.content : 0;
  return (
    <div class="side-scroll" data-overflow={overflow ? 'true' : 'false'}>
      <div class="table-scroll" ref={box} onScroll={measure}>
        {children}
      </div>
      {overflow ? (
        <div class="scroll-rail" ref={rail} onPointerDown={onRail} title="Scroll the table sideways" data-scroll-left={Math.round(size.left)}>
          <div class="scroll-thumb" style={{ width: `${thumbWidth}%`, left: `${thumbLeft}%` }} />
        </div>
      ) : null}
    </div>
  );
}

function cellText<R extends Row>(column: Column<R>, row: R): ComponentChildren {
  const value = row[column.key];
  // `format` takes this column's cell type: the union of every column's would not type-check
  const format = column.format as ((value: Cell, row: R) => ComponentChildren) | undefined;
  const text = format ? format(value ?? null, row) : value === null || value === undefined ? '—' : String(value);
  if (column.clamp && typeof text === 'string') {
    return (
      <span class="cell-clamp" title={text}>
        {text}
      </span>
    );
  }
  if (!column.numeric && typeof text === 'string' && text.length > LONG_TEXT) return <LongText text={text} />;
  return text;
}

/** Text cells longer than this show their start and end, the whole text a click away. */
export const LONG_TEXT = 72;

/** A long name (a module path, a stack frame, an operator's shapes) cut in the middle, where
 *  names differ least ("torch/nn/modules/…/conv.py:456:forward"); a click shows it whole. */
function LongText({ text }: { text: string }) {
  const [open, setOpen] = useState(false);
  return (
    <button
      type="button"
      class={`long-text${open ? ' open' : ''}`}
      data-long-text={text}
      aria-expanded={open}
      title={open ? 'Click to shorten' : text}
      onClick={(e) => { e.stopPropagation(); setOpen(!open); }}
    >
      {open ? text : shorten(text, LONG_TEXT)}
    </button>
  );
}

