// The only place ECharts is imported: just the chart types and components the views use, so
// the bundle stays small (see frontend/README.md for the measured size).

import { BarChart, HeatmapChart, LineChart, PieChart } from 'echarts/charts';
import {
  BrushComponent,
  DataZoomInsideComponent,
  GridComponent,
  LegendComponent,
  MarkLineComponent,
  MarkPointComponent,
  TitleComponent,
  TooltipComponent,
  VisualMapContinuousComponent,
} from 'echarts/components';
import * as echarts from 'echarts/core';
import { CanvasRenderer } from 'echarts/renderers';

echarts.use([
  PieChart,
  BarChart,
  LineChart,
  HeatmapChart,
  VisualMapContinuousComponent,
  GridComponent,
  TooltipComponent,
  LegendComponent,
  TitleComponent,
  MarkPointComponent,
  MarkLineComponent,
  BrushComponent,
  DataZoomInsideComponent,
  CanvasRenderer,
]);

export { echarts };
export type { EChartsCoreOption as ChartOption } from 'echarts/core';

/** Escape text for an HTML tooltip: names come from traces and may hold markup. */
export const esc = (text: unknown): string => echarts.format.encodeHTML(String(text ?? ''));
