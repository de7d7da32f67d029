import { describe, expect, it } from 'vitest';
import { durationTicks, formatDuration } from '../../base/format';
import { CATEGORY_COLORS, STEP_CATEGORIES, categoryColor, stackedBarOption } from './options';

type Axis = { axisLabel?: { formatter?: (v: number) => string; interval?: number; width?: number; overflow?: string } };

describe('stackedBarOption', () => {
  const series = [
    { name: 'A', values: [12_000, 900] },
    { name: 'B', values: [3_000, 50] },
  ];

  it('labels the value axis in one unit, that of the tallest stack', () => {
    const option = stackedBarOption(['step 1', 'step 2'], series, formatDuration, { ticks: durationTicks });
    const label = (option.yAxis as Axis).axisLabel!.formatter!;
    expect([0, 5000, 15_000].map(label)).toEqual(['0 ms', '5 ms', '15 ms']);
  });

  it('draws every category label of horizontal bars, cut to the room given', () => {
    const option = stackedBarOption(['a long hook name', 'b'], series, formatDuration, { horizontal: true, labelWidth: 260 });
    expect((option.yAxis as Axis).axisLabel).toEqual({ interval: 0, width: 260, overflow: 'truncate' });
    expect((option.grid as { left: number }).left).toBe(276);
  });
});

describe('categoryColor', () => {
  it('gives each step category one colour of its own, wherever it is drawn', () => {
    const colors = STEP_CATEGORIES.map(([id]) => categoryColor(id));
    expect(new Set(colors).size).toBe(STEP_CATEGORIES.length);
    // A CPU run's pie lists DataLoader first (no kernel time before it): it keeps the colour
    // it has in the step bars, which list every category in order.
    expect(categoryColor('dataloader')).toBe(CATEGORY_COLORS[5]);
    expect(categoryColor('other')).toBe(CATEGORY_COLORS[7]);
  });
});
