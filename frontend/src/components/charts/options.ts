// Option builders for the chart kinds the views share. Every tooltip is built by a formatter
// that escapes names (trace names may hold markup), and values are formatted with units.

import { axisText } from '../../base/format';
import { esc, type ChartOption } from './echarts';

export interface Slice {
  name: string;
  value: number;
}

/** The `n` largest positive slices, the rest summed into "Other". */
export function topSlices(items: readonly Slice[], n: number): Slice[] {
  const positive = items.filter((s) => Number.isFinite(s.value) && s.value > 0).sort((a, b) => b.value - a.value);
  const top = positive.slice(0, n);
  const rest = positive.slice(n).reduce((sum, s) => sum + s.value, 0);
  return rest > 0 ? [...top, { name: 'Other', value: rest }] : top;
}

const ellipsis = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

export function pieOption(title: string, slices: readonly Slice[], format: (v: number) => string, colors?: string[]): ChartOption {
  // Short names (step categories) fit in a legend beside the pie; long ones (operators,
  // kernels) get a paged legend below it, truncated (the tooltip has the full name).
  const short = slices.every((s) => s.name.length <= 16);
  return {
    ...(colors ? { color: colors } : {}),
    title: { text: title, left: 'center', top: 0, textStyle: { fontSize: 13, fontWeight: 500 } },
    tooltip: {
      trigger: 'item',
      confine: true,
      formatter: (p: { name: string; value: number; percent: number; marker: string }) =>
        `${p.marker}${esc(p.name)}<br/><b>${esc(format(p.value))}</b> (${p.percent.toFixed(1)} %)`,
    },
    legend: short
      ? { type: 'scroll', orient: 'vertical', left: '62%', top: 'middle', textStyle: { fontSize: 11 } }
      : {
          type: 'scroll',
          orient: 'horizontal',
          left: 8,
          right: 8,
          bottom: 0,
          textStyle: { fontSize: 11, width: 180, overflow: 'truncate' },
          formatter: (name: string) => ellipsis(name, 40),
        },
    series: [
      {
        type: 'pie',
        radius: ['0%', short ? '70%' : '62%'],
        center: [short ? '32%' : '50%', '52%'],
        label: { show: false },
        data: slices.map((s) => ({ name: s.name, value: s.value })),
      },
    ],
  };
}

export interface StackSeries {
  name: string;
  values: (number | null)[];
  color?: string;
}

/** The step categories of /overview (`<id>_us`) and /diff (`category`), in order, with the
 * names people know them by. */
export const STEP_CATEGORIES: [string, string][] = [
  ['kernel', 'Kernel'],
  ['memcpy', 'Memcpy'],
  ['memset', 'Memset'],
  ['communication', 'Communication'],
  ['runtime', 'Runtime'],
  ['dataloader', 'DataLoader'],
  ['cpu_exec', 'CPU Exec'],
  ['other', 'Other'],
];

/** Fixed colours for the step categories, so a category looks the same in every chart. */
export const CATEGORY_COLORS = ['#5470c6', '#91cc75', '#73c0de', '#9a60b4', '#ea7ccc', '#fac858', '#ee6666', '#3ba272'];

/** Stacked bars per category (x) with a formatted y axis and a tooltip listing every part. */
export function stackedBarOption(
  categories: readonly string[],
  series: readonly StackSeries[],
  format: (v: number) => string,
  options: { xName?: string; horizontal?: boolean } = {},
): ChartOption {
  const valueAxis = { type: 'value', axisLabel: { formatter: (v: number) => axisText(format(v)) } };
  const categoryAxis = { type: 'category', data: categories, name: options.xName, nameLocation: 'middle', nameGap: 28 };
  return {
    tooltip: {
      trigger: 'axis',
      axisPointer: { type: 'shadow' },
      confine: true,
      formatter: (params: { axisValueLabel: string; seriesName: string; value: number; marker: string }[]) => {
        const total = params.reduce((sum, p) => sum + (Number(p.value) || 0), 0);
        const lines = params
          .filter((p) => Number(p.value))
          .map((p) => `${p.marker}${esc(p.seriesName)}: <b>${esc(format(p.value))}</b> (${((100 * p.value) / (total || 1)).toFixed(1)} %)`);
        return [`<b>${esc(options.xName ?? '')} ${esc(params[0]?.axisValueLabel)}</b>`, ...lines, `Total: <b>${esc(format(total))}</b>`].join('<br/>');
      },
    },
    legend: { type: 'scroll', top: 0 },
    grid: { left: options.horizontal ? 120 : 72, right: 24, top: 40, bottom: 40, containLabel: false },
    xAxis: options.horizontal ? valueAxis : categoryAxis,
    yAxis: options.horizontal ? { ...categoryAxis, nameGap: 100 } : valueAxis,
    series: series.map((s) => ({ name: s.name, type: 'bar', stack: 'total', data: s.values, barMaxWidth: 48, ...(s.color ? { itemStyle: { color: s.color } } : {}) })),
  };
}

export interface RooflinePoint {
  name: string;
  /** arithmetic intensity, FLOP / byte */
  intensity: number;
  /** achieved rate, TFLOP/s */
  tflops: number;
}

/** Roofline: operators as points (arithmetic intensity, achieved TFLOP/s) on log axes, under
 * the roof min(peak, bandwidth x intensity) when the GPU's peak and bandwidth are known
 * (GB/s x FLOP/byte = GFLOP/s). Points are a line series without a line (no scatter chart
 * registered), so the tooltip names each operator. */
export function rooflineOption(points: readonly RooflinePoint[], peakTflops: number | null, bandwidthGbps: number | null, format: (v: number) => string): ChartOption {
  const shown = points.filter((p) => p.intensity > 0 && p.tflops > 0);
  const xs = shown.map((p) => p.intensity);
  const lo = Math.min(...xs, 1) / 10;
  const hi = Math.max(...xs, 1) * 10;
  const series: object[] = [
    {
      name: 'Operators',
      type: 'line',
      data: shown.map((p) => ({ value: [p.intensity, p.tflops], name: p.name })),
      lineStyle: { opacity: 0 },
      symbolSize: 9,
      showSymbol: true,
    },
  ];
  if (peakTflops && bandwidthGbps) {
    const ridge = (peakTflops * 1000) / bandwidthGbps;
    const roof = [lo, Math.min(Math.max(ridge, lo), hi), hi].map((x) => [x, Math.min(peakTflops, (bandwidthGbps * x) / 1000)]);
    series.push({ name: 'Roof', type: 'line', data: roof, showSymbol: false, lineStyle: { type: 'dashed', color: '#ee6666' } });
  }
  return {
    tooltip: {
      trigger: 'item',
      confine: true,
      formatter: (p: { seriesName: string; name: string; value: [number, number] }) =>
        p.seriesName === 'Roof'
          ? `Roof at ${esc(p.value[0].toFixed(1))} FLOP/byte: <b>${esc(format(p.value[1]))}</b>`
          : `<b>${esc(p.name)}</b><br/>${esc(p.value[0].toFixed(1))} FLOP/byte, <b>${esc(format(p.value[1]))}</b>`,
    },
    legend: { top: 0 },
    grid: { left: 80, right: 24, top: 40, bottom: 48 },
    xAxis: { type: 'log', name: 'Arithmetic intensity (FLOP/byte)', nameLocation: 'middle', nameGap: 28, min: lo, max: hi },
    yAxis: { type: 'log', name: 'TFLOP/s', axisLabel: { formatter: (v: number) => axisText(format(v)) } },
    series,
  };
}
