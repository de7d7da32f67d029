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

/** Slice colours: ECharts' palette followed by ten more, so a top 10 or top 20 has no two
 *  slices alike (a top 50 repeats them, in order); "Other" is always grey. */
export const PIE_COLORS = [
  '#5470c6', '#91cc75', '#fac858', '#ee6666', '#73c0de', '#3ba272', '#fc8452', '#9a60b4', '#ea7ccc', '#c23531',
  '#2f4554', '#61a0a8', '#d48265', '#749f83', '#ca8622', '#bda29a', '#6e7074', '#546570', '#c4ccd3', '#8d6e63',
];
export const OTHER_COLOR = '#9e9e9e';

/** The colour of each slice (the legend paints the same). */
export function sliceColors(slices: readonly Slice[]): string[] {
  return slices.map((s, i) => (s.name === 'Other' && i === slices.length - 1 ? OTHER_COLOR : PIE_COLORS[i % PIE_COLORS.length]));
}

/** A pie without ECharts' legend (Pie.tsx lists every slice under it instead: ECharts'
 *  paged legend showed 1-3 truncated names per page), each slice in `colors[i]`. */
export function pieOption(title: string, slices: readonly Slice[], format: (v: number) => string, colors: readonly string[] = sliceColors(slices)): ChartOption {
  return {
    title: { text: title, left: 'center', top: 0, textStyle: { fontSize: 13, fontWeight: 500 } },
    tooltip: {
      trigger: 'item',
      confine: true,
      formatter: (p: { name: string; value: number; percent: number; marker: string }) =>
        `${p.marker}${esc(p.name)}<br/><b>${esc(format(p.value))}</b> (${p.percent.toFixed(1)} %)`,
    },
    series: [
      {
        type: 'pie',
        radius: ['0%', '72%'],
        center: ['50%', '56%'],
        label: { show: false },
        data: slices.map((s, i) => ({ name: s.name, value: s.value, itemStyle: { color: colors[i] } })),
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
export const STEP_CATEGORIES = [
  ['kernel', 'Kernel'],
  ['memcpy', 'Memcpy'],
  ['memset', 'Memset'],
  ['communication', 'Communication'],
  ['runtime', 'Runtime'],
  ['dataloader', 'DataLoader'],
  ['cpu_exec', 'CPU Exec'],
  ['other', 'Other'],
] as const;

/** Fixed colours for the step categories, so a category looks the same in every chart. */
export const CATEGORY_COLORS = ['#5470c6', '#91cc75', '#73c0de', '#9a60b4', '#ea7ccc', '#fac858', '#ee6666', '#3ba272'];

/** The colour of step category `id` (`kernel`, `dataloader`, ...): by its place in
 *  STEP_CATEGORIES, never by its row in a table that leaves empty categories out. */
export function categoryColor(id: string): string {
  return CATEGORY_COLORS[STEP_CATEGORIES.findIndex(([category]) => category === id)] ?? '#999999';
}

/** Stacked bars per category (x) with a formatted y axis and a tooltip listing every part. */
export function stackedBarOption(
  categories: readonly string[],
  series: readonly StackSeries[],
  format: (v: number) => string,
  options: {
    xName?: string;
    horizontal?: boolean;
    /** The value axis's tick labels for values up to the tallest stack (`durationTicks`: one
     *  unit on the whole axis); by default each tick is `format`ted. */
    ticks?: (max: number) => (v: number) => string;
    /** Horizontal bars: the room for the category labels, every one of them drawn (cut with
     *  an ellipsis to this width; the tooltip has the whole name). */
    labelWidth?: number;
  } = {},
): ChartOption {
  const tallest = Math.max(0, ...categories.map((_, i) => series.reduce((sum, s) => sum + Math.max(0, Number(s.values[i]) || 0), 0)));
  const tick = options.ticks ? options.ticks(tallest) : (v: number) => axisText(format(v));
  const valueAxis = { type: 'value', axisLabel: { formatter: tick } };
  const categoryAxis = {
    type: 'category',
    data: categories,
    name: options.xName,
    nameLocation: 'middle',
    nameGap: 28,
    ...(options.labelWidth ? { axisLabel: { interval: 0, width: options.labelWidth, overflow: 'truncate' } } : {}),
  };
  const left = options.horizontal ? (options.labelWidth ?? 104) + 16 : 72;
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
    grid: { left, right: 24, top: 40, bottom: 40, containLabel: false },
    xAxis: options.horizontal ? valueAxis : categoryAxis,
    // horizontal bars read top-down in the order given (ECharts starts at the bottom)
    yAxis: options.horizontal ? { ...categoryAxis, nameGap: left - 20, inverse: true } : valueAxis,
    series: series.map((s) => ({ name: s.name, type: 'bar', stack: 'total', data: s.values, barMaxWidth: 48, ...(s.color ? { itemStyle: { color: s.color } } : {}) })),
  };
}

export interface HeatCell {
  x: number;
  y: number;
  value: number | null;
  /** Drawn with an outline (e.g. a straggler). */
  marked?: boolean;
}

/** A heat map of cells on a category grid (x and y labels), coloured by value on a
 * continuous scale with its legend; many rows scroll with an inside zoom on y. */
export function heatmapOption(
  xLabels: readonly string[],
  yLabels: readonly string[],
  cells: readonly HeatCell[],
  format: (v: number) => string,
  options: { xName?: string; yName?: string; valueName?: string } = {},
): ChartOption {
  const values = cells.map((c) => c.value).filter((v): v is number => v !== null && Number.isFinite(v));
  const max = values.length ? Math.max(...values) : 1;
  const min = values.length ? Math.min(...values) : 0;
  const manyRows = yLabels.length > 32;
  return {
    tooltip: {
      confine: true,
      formatter: (p: { data: { value: [number, number, number | null] } }) => {
        const [x, y, v] = p.data.value;
        return `<b>${esc(yLabels[y])}</b>, ${esc(options.xName ?? '')} ${esc(xLabels[x])}<br/>${esc(options.valueName ?? '')}: <b>${esc(v === null ? '—' : format(v))}</b>`;
      },
    },
    grid: { left: 80, right: 112, top: 16, bottom: 48 },
    xAxis: { type: 'category', data: xLabels, name: options.xName, nameLocation: 'middle', nameGap: 28, splitArea: { show: true } },
    yAxis: { type: 'category', data: yLabels, inverse: true, splitArea: { show: true } },
    visualMap: {
      type: 'continuous',
      min,
      max: max > min ? max : min + 1,
      calculable: true,
      orient: 'vertical',
      right: 8,
      top: 'middle',
      itemHeight: 120,
      formatter: (v: number) => axisText(format(v)),
      // a sequential blue scale: outlines (orange) stay visible on every cell
      inRange: { color: ['#f7fbff', '#c6dbef', '#6baed6', '#2171b5', '#08306b'] },
    },
    ...(manyRows ? { dataZoom: [{ type: 'inside', yAxisIndex: 0, filterMode: 'none' }] } : {}),
    series: [
      {
        type: 'heatmap',
        data: cells.map((c) => ({
          value: [c.x, c.y, c.value],
          ...(c.marked ? { itemStyle: { borderColor: '#ff7f0e', borderWidth: 3 } } : {}),
        })),
        emphasis: { itemStyle: { borderColor: '#333', borderWidth: 1 } },
      },
    ],
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
