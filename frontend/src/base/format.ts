// Formatting of the API's units for people: durations arrive in microseconds, sizes in
// bytes. Pure functions (no DOM), unit-tested in format.test.ts; the e2e tests mirror
// formatDuration/formatBytes to find API numbers on the page, so keep the rules simple.

const MINUS = '-';

/** `text` (digits of |value|) with a minus for a negative value, unless it rounds to zero:
 * -0.04 µs is shown as "0 µs", never "-0 µs". */
function signed(value: number, text: string): string {
  return value < 0 && /[1-9]/.test(text) ? MINUS + text : text;
}

/** Microseconds as "812.3 µs", "4.57 ms" or "1.23 s"; "—" for missing values. */
export function formatDuration(us: number | null | undefined): string {
  if (us === null || us === undefined || !Number.isFinite(us)) return '—';
  const a = Math.abs(us);
  // Bounds where the rounded text would reach the next unit ("1000 µs", "1000.00 ms").
  if (a < 999.95) return `${signed(us, trimZero(a.toFixed(1)))} µs`;
  if (a < 999_995) return `${signed(us, (a / 1e3).toFixed(2))} ms`;
  return `${signed(us, (a / 1e6).toFixed(2))} s`;
}

/** Tick labels of a time axis running up to `maxUs`, all in the unit the largest value reads
 *  in ("0 ms", "2.5 ms", "5 ms"): labelled one by one, the axis read "0 µs" under "3 ms". */
export function durationTicks(maxUs: number): (us: number) => string {
  const a = Math.abs(maxUs);
  const [scale, unit] = a >= 999_995 ? [1e6, 's'] : a >= 999.95 ? [1e3, 'ms'] : [1, 'µs'];
  return (us) => `${axisText((us / scale).toFixed(2))} ${unit}`;
}

/** Bytes in binary units, named as such (IEC, as the CLI and torch's memory_viz write them):
 *  "512 B", "1.50 KiB", "3.20 MiB", "31.74 GiB". */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return '—';
  const a = Math.abs(bytes);
  if (a < 1024) return `${signed(bytes, String(Math.round(a)))} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = a / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${signed(bytes, value.toFixed(2))} ${units[unit]}`;
}

/** A bandwidth, always in GB/s (decimal, as NCCL's tests and the API's `_gbps` columns count:
 * 1 GB/s = 10^9 bytes per second), so bandwidths compare at a glance and never read as
 * memory's binary units: "9.38 GB/s", "40.0 GB/s", "0.04 GB/s", "0.000186 GB/s" (three
 * significant digits below 0.01). */
export function formatBandwidth(gbps: number | null | undefined): string {
  if (gbps === null || gbps === undefined || !Number.isFinite(gbps)) return '—';
  const a = Math.abs(gbps);
  const digits = a >= 99.95 ? 0 : a >= 9.995 ? 1 : a >= 0.00995 || a === 0 ? 2 : Math.min(12, 2 - Math.floor(Math.log10(a)));
  return `${signed(gbps, a.toFixed(digits))} GB/s`;
}

/** A percentage already in 0..100: "12.3 %". */
export function formatPct(pct: number | null | undefined, digits = 1): string {
  if (pct === null || pct === undefined || !Number.isFinite(pct)) return '—';
  return `${signed(pct, Math.abs(pct).toFixed(digits))} %`;
}

/** A share in 0..1 as a percentage. */
export function formatShare(share: number | null | undefined): string {
  return formatPct(share === null || share === undefined ? share : share * 100);
}

/** Integers with thousands separators (","), other numbers with up to 2 decimals. */
export function formatNumber(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '—';
  const digits = Number.isInteger(value) ? String(Math.abs(value)) : trimZero(Math.abs(value).toFixed(2));
  return signed(value, groupThousands(digits));
}


/** FLOPs in decimal units: "812 FLOP", "21.23 MFLOP", "1.57 GFLOP", "3.20 TFLOP"; "—" missing. */
export function formatFlops(flops: number | null | undefined): string {
  if (flops === null || flops === undefined || !Number.isFinite(flops)) return '—';
  const a = Math.abs(flops);
  if (a < 1000) return `${signed(flops, String(Math.round(a)))} FLOP`;
  const units = ['KFLOP', 'MFLOP', 'GFLOP', 'TFLOP', 'PFLOP'];
  let value = a / 1000;
  let unit = 0;
  while (value >= 999.995 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${signed(flops, value.toFixed(2))} ${units[unit]}`;
}

/** A rate in TFLOP/s, three decimals ("0.024 TFLOP/s"); "—" for missing values. */
export function formatTflops(tflops: number | null | undefined): string {
  if (tflops === null || tflops === undefined || !Number.isFinite(tflops)) return '—';
  return `${signed(tflops, Math.abs(tflops).toFixed(3))} TFLOP/s`;
}

/** Digits of a non-negative number with "," between thousands. */
function groupThousands(text: string): string {
  const [whole, fraction] = text.split('.');
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return grouped + (fraction !== undefined ? `.${fraction}` : '');
}

function trimZero(text: string): string {
  return text.includes('.') ? text.replace(/\.?0+$/, '') : text;
}

/** Difference b - a with a sign, formatted by `format`; no sign when it rounds to zero
 * ("0 µs", never "+0 µs" or "-0 µs"). */
export function formatDelta(delta: number | null | undefined, format: (v: number) => string): string {
  if (delta === null || delta === undefined || !Number.isFinite(delta)) return '—';
  const text = format(delta);
  return delta > 0 && /[1-9]/.test(text) ? `+${text}` : text;
}

/** -1, 0 or 1: the sign of a delta as `formatDelta` shows it (0 when it rounds to zero). */
export function deltaSign(delta: number | null | undefined, format: (v: number) => string): number {
  const text = formatDelta(delta, format);
  return text.startsWith('+') ? 1 : text.startsWith(MINUS) ? -1 : 0;
}

/** An axis tick label: `text` of a formatter above without trailing decimal zeros, since the
 * ticks are round values ("210 ms", "1.5 MiB", not "210.00 ms", "1.50 MiB"). */
export function axisText(text: string): string {
  return text.replace(/^([^.]*\d)\.(\d*?)0+(?=\D|$)/, (_, whole: string, fraction: string) => (fraction ? `${whole}.${fraction}` : whole));
}

// Above 128, only divisors of 1024: ticks never reach "1000 KiB" before the next unit.
const BYTE_STEPS = [1, 2, 4, 5, 8, 10, 16, 20, 32, 50, 64, 100, 128, 256, 512];

/** Tick spacing for a bytes axis from 0 to `maxBytes` with about `ticks` intervals: a round
 * number of B, KiB, MiB, GiB or TiB (1, 2, 5, ... or a power of two), so the labels that
 * formatBytes writes read 256 KiB, 512 KiB, 768 KiB, 1 MiB, not 292.97 KiB, 585.94 KiB. */
export function byteTickInterval(maxBytes: number, ticks = 5): number {
  const target = Number.isFinite(maxBytes) && maxBytes > 0 ? maxBytes / ticks : 1;
  for (let unit = 1; unit <= 1024 ** 4; unit *= 1024) {
    for (const step of BYTE_STEPS) if (step * unit >= target) return step * unit;
  }
  return Math.ceil(target / 1024 ** 4) * 1024 ** 4;
}

/** Tick spacing for a time axis (µs) spanning `spanUs` with about `ticks` intervals: 1, 2 or 5
 * times a power of ten, so formatDuration's labels read "200 ms", "400 ms", never "297.6 µs". */
export function timeTickInterval(spanUs: number, ticks = 6): number {
  const target = Number.isFinite(spanUs) && spanUs > 0 ? spanUs / ticks : 1;
  const decade = 10 ** Math.floor(Math.log10(target));
  return ([1, 2, 5, 10].find((step) => step * decade >= target) ?? 10) * decade;
}

/** An axis from a round tick at or below `min` to one at or above `max`: the first and last
 * labels are round too, and none sits beside an odd end value ("1 s" next to "1.03 s"). */
export function roundAxis(min: number, max: number, interval: number): { min: number; max: number; interval: number } {
  const lo = Math.floor(min / interval) * interval;
  return { min: lo, max: Math.max(Math.ceil(max / interval) * interval, lo + interval), interval };
}

/** "1 track", "3 tracks": `count` with the word in the singular or plural. */
export function plural(count: number, word: string, pluralWord = `${word}s`): string {
  return `${count.toLocaleString('en-US')} ${count === 1 ? word : pluralWord}`;
}
