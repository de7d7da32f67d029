// Formatting of the API's units for people: durations arrive in microseconds, sizes in
// bytes. Pure functions (no DOM), unit-tested in format.test.ts; the e2e tests mirror
// formatDuration/formatBytes to find API numbers on the page, so keep the rules simple.

const MINUS = '-';

/** Microseconds as "812.3 µs", "4.57 ms" or "1.23 s"; "—" for missing values. */
export function formatDuration(us: number | null | undefined): string {
  if (us === null || us === undefined || !Number.isFinite(us)) return '—';
  const sign = us < 0 ? MINUS : '';
  const a = Math.abs(us);
  if (a < 1e3) return `${sign}${trimZero(a.toFixed(1))} µs`;
  if (a < 1e6) return `${sign}${(a / 1e3).toFixed(2)} ms`;
  return `${sign}${(a / 1e6).toFixed(2)} s`;
}

/** Bytes in binary units: "512 B", "1.50 KB", "3.20 MB", "31.74 GB". */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return '—';
  const sign = bytes < 0 ? MINUS : '';
  const a = Math.abs(bytes);
  if (a < 1024) return `${sign}${Math.round(a)} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let value = a / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${sign}${value.toFixed(2)} ${units[unit]}`;
}

/** A percentage already in 0..100: "12.3 %". */
export function formatPct(pct: number | null | undefined, digits = 1): string {
  if (pct === null || pct === undefined || !Number.isFinite(pct)) return '—';
  return `${pct.toFixed(digits)} %`;
}

/** A share in 0..1 as a percentage. */
export function formatShare(share: number | null | undefined): string {
  return formatPct(share === null || share === undefined ? share : share * 100);
}

/** Integers with thousands separators (","), other numbers with up to 2 decimals. */
export function formatNumber(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '—';
  if (Number.isInteger(value)) return groupThousands(String(value));
  return groupThousands(trimZero(value.toFixed(2)));
}

function groupThousands(text: string): string {
  const negative = text.startsWith('-');
  const body = negative ? text.slice(1) : text;
  const [whole, fraction] = body.split('.');
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return (negative ? MINUS : '') + grouped + (fraction !== undefined ? `.${fraction}` : '');
}

function trimZero(text: string): string {
  return text.includes('.') ? text.replace(/\.?0+$/, '') : text;
}

/** Difference b - a with a sign, formatted by `format`; "+0" style for no change. */
export function formatDelta(delta: number | null | undefined, format: (v: number) => string): string {
  if (delta === null || delta === undefined || !Number.isFinite(delta)) return '—';
  if (delta > 0) return `+${format(delta)}`;
  return format(delta);
}
