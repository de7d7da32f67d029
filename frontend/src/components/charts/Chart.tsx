// An ECharts instance in a div: created once, updated with each option, resized with its box,
// re-created when the theme changes, disposed on unmount. Animation is off: charts appear
// at once and screenshots show the final picture.

import { useEffect, useRef } from 'preact/hooks';
import { useThemeValue } from '../theme';
import { echarts, type ChartOption } from './echarts';

export type ChartInstance = ReturnType<typeof echarts.init>;
type ECharts = ChartInstance;

export interface ChartProps {
  option: ChartOption;
  height?: number;
  /** Called with the instance after each option is applied (events, brush, ...). */
  onChart?: (chart: ECharts) => void | (() => void);
  label: string;
  testId?: string;
}

export function Chart({ option, height = 300, onChart, label, testId }: ChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const chart = useRef<ECharts | null>(null);
  const theme = useThemeValue();

  useEffect(() => {
    const el = box.current;
    if (!el) return undefined;
    const instance = echarts.init(el, theme === 'dark' ? 'dark' : undefined, { renderer: 'canvas' });
    chart.current = instance;
    const observer = new ResizeObserver(() => instance.resize());
    observer.observe(el);
    return () => {
      observer.disconnect();
      instance.dispose();
      chart.current = null;
    };
  }, [theme]);

  useEffect(() => {
    const instance = chart.current;
    if (!instance) return undefined;
    instance.setOption({ animation: false, backgroundColor: 'transparent', ...option }, { notMerge: true });
    return onChart?.(instance) ?? undefined;
  }, [option, theme, onChart]);

  return <div class="chart" ref={box} style={{ height: `${height}px` }} role="img" aria-label={label} data-testid={testId} data-chart={label} />;
}
