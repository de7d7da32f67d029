// A pie with a legend that names every slice shown (the top N and "Other"): one line per
// slice under the chart, its colour, its name (wrapped to two lines at most, in full on
// hover) and its value. Long names (operators, kernels, input shapes) stay readable even
// with four pies across, which ECharts' own paged legend never managed.

import { useMemo } from 'preact/hooks';
import { formatPct } from '../../base/format';
import { Chart } from './Chart';
import { pieOption, sliceColors, type Slice } from './options';

export interface PieProps {
  title: string;
  slices: readonly Slice[];
  format: (value: number) => string;
  /** One colour per slice (the step categories' fixed ones); by default `sliceColors`. */
  colors?: readonly string[];
  /** Height of the chart itself; the legend adds a line per slice below it. */
  height?: number;
  label: string;
}

export function Pie({ title, slices, format, colors: given, height = 220, label }: PieProps) {
  const colors = useMemo(() => given ?? sliceColors(slices), [given, slices]);
  const option = useMemo(() => pieOption(title, slices, format, colors), [title, slices, format, colors]);
  const total = slices.reduce((sum, s) => sum + s.value, 0);
  return (
    <div class="pie">
      <Chart option={option} height={height} label={label} />
      <ol class="pie-legend" data-legend={label} aria-label={`${label}: legend`}>
        {slices.map((slice, i) => {
          const share = formatPct(total > 0 ? (100 * slice.value) / total : null);
          return (
            <li key={`${i}|${slice.name}`} title={`${slice.name}\n${format(slice.value)} (${share})`}>
              <span class="swatch" style={{ background: colors[i] }} />
              <span class="legend-name" data-slice={slice.name}>{slice.name}</span>
              <span class="legend-value">{share}</span>
            </li>
          );
        })}
      </ol>
    </div>
  );
}
