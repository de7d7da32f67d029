// A kernel name in a table cell: its short form (base/names.ts), the part that tells it
// apart from the other kernels of the table; a click shows the whole demangled name in
// place (a second click hides it), so the full name is one click away and can be selected
// and copied.

import { useState } from 'preact/hooks';
import { sequenceKernels, shortKernelName, shortKernelNames } from '../base/names';
import { LONG_TEXT, type Column } from './table/DataTable';
import { shorten, type Cell, type Row } from './table/logic';

/** Short forms longer than this are cut in the middle. A short form keeps the part that tells
 *  kernels apart, so only names far beyond a line are cut: those that do not demangle (cuDNN's
 *  `_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemm...`, 2,000 characters) would
 *  otherwise fill a table's cell with twenty lines. */
export const KERNEL_NAME_LIMIT = 2 * LONG_TEXT;

/** What a kernel's cell shows of its short form: the start and end of one beyond the limit. */
export function shownKernelName(short: string): string {
  return shorten(short, KERNEL_NAME_LIMIT);
}

function Expandable({ full, short }: { full: string; short: string }) {
  const [open, setOpen] = useState(false);
  if (short === full) return <span class="kernel-name">{full}</span>;
  return (
    <span class="kernel-name">
      <button type="button" class="kernel-name-toggle" aria-expanded={open} title={open ? 'Show the short name' : full} data-kernel-name={full} onClick={() => setOpen(!open)}>
        {open ? '▾ ' : '▸ '}
        {short}
      </button>
      {open ? <code class="kernel-name-full">{full}</code> : null}
    </span>
  );
}

/** A kernel name in running text, in its short form among `names` (the others it is quoted
 *  with), the full name a click away. */
export function KernelName({ name, names }: { name: string; names: readonly string[] }) {
  const short = shortKernelNames(names);
  return <Expandable full={name} short={shownKernelName(short.get(name) ?? shortKernelName(name))} />;
}

/** A table column of kernel names, shortened so that the kernels of `rows` stay apart. */
export function kernelNameColumn<R extends Row = Row>(key: keyof R & string, label: string, rows: readonly R[]): Column<R> {
  const short = shortKernelNames(rows.map((r) => String(r[key])));
  return {
    key,
    label,
    format: (v: Cell) => (v === null ? '—' : <Expandable full={String(v)} short={shownKernelName(short.get(String(v)) ?? shortKernelName(String(v)))} />),
  } as Column<R>;
}

/** A table column of kernel sequences (`a | b | c`, as /kernel_sequences names them): each
 *  kernel shortened, joined by arrows; the click shows one full name a line. */
export function kernelSequenceColumn<R extends Row = Row>(key: keyof R & string, label: string, rows: readonly R[]): Column<R> {
  const short = shortKernelNames(rows.flatMap((r) => sequenceKernels(String(r[key]))));
  return {
    key,
    label,
    format: (v: Cell) => {
      const kernels = sequenceKernels(String(v));
      return <Expandable full={kernels.join('\n')} short={kernels.map((k) => short.get(k) ?? k).join(' → ')} />;
    },
  } as Column<R>;
}
