// Painting the timeline on a 2D canvas: ruler with steps, process headers, track labels,
// counter area charts, slices (merged blocks hatched), a step's critical path (its segments
// on their tracks, the rest dimmed, arrows where it changes track), the selected event, flow
// arrows and the selected range. Pure drawing from a snapshot of the state; returns what it drew so the
// page can expose it to tests (data-* attributes on the canvas box).

import type { CounterSeries, TimelineEndpoint, TimelineFlow } from '../../api/types';
import { formatBytes, formatDuration, formatNumber } from '../../base/format';
import { categoryColour } from '../../components/criticalPath';
import { fitText, LANE_PX, nameColour, pathBands, seriesOf, textOn, tickLabel, ticks, TRACK_GAP_PX, type Layout, type PathSegment, type SliceData, type Window } from './logic';

export const GUTTER_PX = 230;
export const RULER_PX = 36;

export interface Palette {
  bg: string;
  fg: string;
  muted: string;
  border: string;
  panel: string;
  accent: string;
  dark: boolean;
}

export interface Step {
  step: number;
  start_us: number;
  end_us: number;
}

export interface Range {
  start: number;
  end: number;
  tracks: number[];
}

/** A step's critical path to draw: its segments in time order, the [from, to] segments an
 *  arrow joins (`pathArrows`), and the hovered and selected segment (-1: none). */
export interface PathScene {
  segments: PathSegment[];
  arrows: [number, number][];
  hover: number;
  selected: number;
}

/** The path's outline and arrows: apart from the flow arrows' orange and purple. */
export const PATH_COLOUR = '#d81b60';

export interface Scene {
  width: number;
  height: number;
  scrollTop: number;
  view: Window;
  layout: Layout;
  slices: SliceData | null;
  counters: CounterSeries[] | null;
  steps: Step[];
  selected: TimelineEndpoint | null;
  hover: number;
  flows: TimelineFlow[];
  range: Range | null;
  box: { x0: number; y0: number; x1: number; y1: number } | null;
  path: PathScene | null;
  palette: Palette;
}

export interface Drawn {
  slices: number;
  blocks: number;
  arrows: number;
  colours: number;
  /** Critical-path segments and the arrows between them on screen. */
  pathSegments: number;
  pathArrows: number;
}

const FONT = '11px system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif';
const BOLD = '600 11px system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif';
const CHAR_PX = 6.1;

let hatch: { dark: boolean; pattern: CanvasPattern | null } | null = null;

function hatchPattern(ctx: CanvasRenderingContext2D, dark: boolean): CanvasPattern | null {
  if (hatch && hatch.dark === dark) return hatch.pattern;
  const tile = document.createElement('canvas');
  tile.width = 6;
  tile.height = 6;
  const t = tile.getContext('2d');
  if (!t) return null;
  t.strokeStyle = dark ? 'rgba(0,0,0,0.55)' : 'rgba(255,255,255,0.7)';
  t.lineWidth = 1.5;
  t.beginPath();
  t.moveTo(-1, 7);
  t.lineTo(7, -1);
  t.moveTo(5, 7);
  t.lineTo(7, 5);
  t.moveTo(-1, 1);
  t.lineTo(1, -1);
  t.stroke();
  hatch = { dark, pattern: ctx.createPattern(tile, 'repeat') };
  return hatch.pattern;
}

/** x of time `t` (µs) on the canvas. */
export function xOf(scene: Pick<Scene, 'view' | 'width'>, t: number): number {
  const plot = scene.width - GUTTER_PX;
  return GUTTER_PX + ((t - scene.view.start) / (scene.view.end - scene.view.start)) * plot;
}

/** Time (µs) at canvas x. */
export function timeAt(scene: Pick<Scene, 'view' | 'width'>, x: number): number {
  const plot = scene.width - GUTTER_PX;
  return scene.view.start + ((x - GUTTER_PX) / plot) * (scene.view.end - scene.view.start);
}

/** Canvas y of the top of (track, lane), or null when the track is not shown. */
export function laneY(scene: Pick<Scene, 'layout' | 'scrollTop'>, track: number, lane: number): number | null {
  const top = scene.layout.trackTop.get(track);
  return top === undefined ? null : RULER_PX + top - scene.scrollTop + lane * LANE_PX + 1;
}

function formatCounter(series: CounterSeries, value: number | null): string {
  if (value === null || !Number.isFinite(value)) return '—';
  if (series.unit === 'B') return formatBytes(value);
  if (series.unit === '%') return `${value.toFixed(1)} %`;
  // other units (GB/s of the copy-bandwidth rows) follow the number
  return series.unit ? `${formatNumber(value)} ${series.unit}` : formatNumber(value);
}

export function counterText(series: CounterSeries, value: number | null): string {
  return formatCounter(series, value);
}

export function draw(ctx: CanvasRenderingContext2D, scene: Scene): Drawn {
  const { width: W, height: H, view, layout, palette: p } = scene;
  const drawn: Drawn = { slices: 0, blocks: 0, arrows: 0, colours: 0, pathSegments: 0, pathArrows: 0 };
  const colours = new Set<string>();
  ctx.fillStyle = p.bg;
  ctx.fillRect(0, 0, W, H);
  ctx.font = FONT;
  ctx.textBaseline = 'middle';
  const plotW = W - GUTTER_PX;
  if (plotW <= 0) return drawn;
  const upp = (view.end - view.start) / plotW;

  // ---- rows: backgrounds, counters, slices (clipped below the ruler)
  ctx.save();
  ctx.beginPath();
  ctx.rect(0, RULER_PX, W, H - RULER_PX);
  ctx.clip();
  const visibleTop = scene.scrollTop;
  const visibleBottom = scene.scrollTop + H - RULER_PX;
  for (const row of layout.rows) {
    if (row.y + row.h < visibleTop || row.y > visibleBottom) continue;
    const y = RULER_PX + row.y - scene.scrollTop;
    if (row.type === 'header') {
      ctx.fillStyle = p.panel;
      ctx.fillRect(0, y, W, row.h);
      ctx.fillStyle = p.border;
      ctx.fillRect(0, y + row.h - 1, W, 1);
    } else if (row.type === 'track') {
      ctx.fillStyle = p.border;
      ctx.fillRect(GUTTER_PX, y + row.h - 1, plotW, 1);
    } else if (row.type === 'counter') {
      const series = seriesOf(scene.counters, row);
      if (series) drawCounter(ctx, scene, series, y, row.h, upp);
    }
  }

  // step boundaries behind the slices
  ctx.strokeStyle = p.muted;
  ctx.globalAlpha = 0.35;
  ctx.setLineDash([3, 4]);
  for (const step of scene.steps) {
    const x = xOf(scene, step.start_us);
    if (x < GUTTER_PX || x > W) continue;
    ctx.beginPath();
    ctx.moveTo(Math.round(x) + 0.5, RULER_PX);
    ctx.lineTo(Math.round(x) + 0.5, H);
    ctx.stroke();
  }
  ctx.setLineDash([]);
  ctx.globalAlpha = 1;

  ctx.save();
  ctx.beginPath();
  ctx.rect(GUTTER_PX, RULER_PX, plotW, H - RULER_PX);
  ctx.clip();
  const data = scene.slices;
  if (data) {
    const r = data.reply;
    const pattern = hatchPattern(ctx, p.dark);
    const colourOf = new Map<number, string>();
    for (let i = 0; i < r.track.length; i += 1) {
      const y = laneY(scene, r.track[i], r.lane[i]);
      if (y === null || y + LANE_PX < RULER_PX || y > H) continue;
      let x0 = GUTTER_PX + (r.start_us[i] - view.start) / upp;
      let x1 = x0 + r.dur_us[i] / upp;
      if (x1 < GUTTER_PX || x0 > W) continue;
      x0 = Math.max(x0, GUTTER_PX - 2);
      x1 = Math.min(x1, W + 2);
      const w = Math.max(x1 - x0, 1);
      let colour = colourOf.get(r.name[i]);
      if (colour === undefined) {
        colour = nameColour(r.names[r.name[i]], p.dark);
        colourOf.set(r.name[i], colour);
      }
      colours.add(colour);
      const h = LANE_PX - 2;
      ctx.fillStyle = colour;
      if (r.event[i] < 0) {
        drawn.blocks += 1;
        ctx.globalAlpha = 0.45 + 0.5 * Math.min(r.busy_us[i] / Math.max(r.dur_us[i], 1e-9), 1);
        ctx.fillRect(x0, y, w, h);
        ctx.globalAlpha = 1;
        if (pattern && w >= 3) {
          ctx.fillStyle = pattern;
          ctx.fillRect(x0, y, w, h);
        }
      } else {
        drawn.slices += 1;
        ctx.fillRect(x0, y, w, h);
      }
      if (w > 26) {
        const left = Math.max(x0, GUTTER_PX) + 3;
        const label = fitText(r.event[i] < 0 ? `${r.names[r.name[i]]} (${r.count[i]})` : r.names[r.name[i]], Math.min(x1, W) - left - 2, CHAR_PX);
        if (label) {
          ctx.fillStyle = textOn(colour);
          ctx.fillText(label, left, y + h / 2 + 0.5);
        }
      }
      if (i === scene.hover) {
        ctx.strokeStyle = p.fg;
        ctx.lineWidth = 1;
        ctx.strokeRect(x0 + 0.5, y + 0.5, w - 1, h - 1);
      }
    }
  }
  drawn.colours = colours.size;
  if (scene.path) drawPath(ctx, scene, drawn);

  // the selected event, whatever the level of detail shows around it
  const sel = scene.selected;
  if (sel) {
    const y = laneY(scene, sel.track, sel.lane);
    if (y !== null) {
      const x0 = xOf(scene, sel.ts_us);
      const w = Math.max(sel.dur_us / upp, 2);
      ctx.strokeStyle = p.fg;
      ctx.lineWidth = 2;
      ctx.strokeRect(Math.max(x0, GUTTER_PX - 4) - 1, y - 1, Math.min(w, W + 8 - x0) + 2, LANE_PX);
      ctx.lineWidth = 1;
    }
  }

  // flow arrows of the selected event
  for (const flow of scene.flows) {
    const ya = laneY(scene, flow.from.track, flow.from.lane);
    const yb = laneY(scene, flow.to.track, flow.to.lane);
    if (ya === null || yb === null) continue;
    const xa = xOf(scene, flow.from.ts_us);
    const xb = xOf(scene, flow.to.ts_us);
    drawArrow(ctx, xa, ya + LANE_PX / 2 - 1, xb, yb + LANE_PX / 2 - 1, flow.kind === 'fwdbwd' ? '#8e24aa' : p.accent);
    drawn.arrows += 1;
  }

  // the selected range and the box being dragged
  if (scene.range) {
    const xa = xOf(scene, scene.range.start);
    const xb = xOf(scene, scene.range.end);
    ctx.fillStyle = p.accent;
    ctx.globalAlpha = 0.12;
    ctx.fillRect(xa, RULER_PX, xb - xa, H - RULER_PX);
    ctx.globalAlpha = 1;
    ctx.strokeStyle = p.accent;
    ctx.beginPath();
    ctx.moveTo(Math.round(xa) + 0.5, RULER_PX);
    ctx.lineTo(Math.round(xa) + 0.5, H);
    ctx.moveTo(Math.round(xb) + 0.5, RULER_PX);
    ctx.lineTo(Math.round(xb) + 0.5, H);
    ctx.stroke();
  }
  if (scene.box) {
    const { x0, y0, x1, y1 } = scene.box;
    ctx.fillStyle = p.accent;
    ctx.globalAlpha = 0.15;
    ctx.fillRect(Math.min(x0, x1), Math.min(y0, y1), Math.abs(x1 - x0), Math.abs(y1 - y0));
    ctx.globalAlpha = 1;
    ctx.strokeStyle = p.accent;
    ctx.strokeRect(Math.min(x0, x1) + 0.5, Math.min(y0, y1) + 0.5, Math.abs(x1 - x0), Math.abs(y1 - y0));
  }
  ctx.restore();

  // ---- gutter: process headers, track and counter names
  ctx.fillStyle = p.bg;
  for (const row of layout.rows) {
    if (row.y + row.h < visibleTop || row.y > visibleBottom) continue;
    const y = RULER_PX + row.y - scene.scrollTop;
    if (row.type === 'header') {
      ctx.fillStyle = p.fg;
      ctx.font = BOLD;
      const text = `${row.collapsed ? '▸' : '▾'} ${row.label}`;
      ctx.fillText(fitText(text, GUTTER_PX - 8, CHAR_PX + 0.4) || text.slice(0, 3), 6, y + row.h / 2);
      ctx.font = FONT;
      ctx.fillStyle = p.muted;
      ctx.fillText(fitText(row.detail, plotW - 12, CHAR_PX), GUTTER_PX + 6, y + row.h / 2);
      continue;
    }
    ctx.fillStyle = p.panel;
    ctx.fillRect(0, y, GUTTER_PX - 1, row.h);
    if (row.type === 'track') {
      ctx.fillStyle = p.fg;
      ctx.fillText(fitText(row.track.thread, GUTTER_PX - 22, CHAR_PX), 16, y + LANE_PX / 2);
      if (row.track.lanes > 1 && row.h > LANE_PX * 1.5) {
        ctx.fillStyle = p.muted;
        ctx.fillText(`${row.track.lanes} levels`, 16, y + LANE_PX * 1.5);
      }
    } else {
      ctx.fillStyle = p.fg;
      ctx.fillText(fitText(row.label, GUTTER_PX - 22, CHAR_PX), 16, y + 10);
      const series = seriesOf(scene.counters, row);
      if (series) {
        const peak = Math.max(0, ...series.max.map((v) => (v === null ? 0 : v)));
        ctx.fillStyle = p.muted;
        ctx.fillText(`max ${formatCounter(series, peak)}`, 16, y + 24);
      }
    }
  }
  ctx.fillStyle = p.border;
  ctx.fillRect(GUTTER_PX - 1, RULER_PX, 1, H - RULER_PX);
  ctx.restore();

  drawRuler(ctx, scene, plotW);
  return drawn;
}

function drawCounter(ctx: CanvasRenderingContext2D, scene: Scene, series: CounterSeries, y: number, h: number, upp: number) {
  const { view, palette: p } = scene;
  const values = series.max;
  const n = series.time_us.length;
  if (!n) return;
  let top = series.unit === '%' ? 100 : 0;
  for (const v of values) if (v !== null && v > top) top = v;
  if (top <= 0) top = 1;
  const base = y + h - 3;
  const scale = (h - 8) / top;
  const bucket = n > 1 ? series.time_us[1] - series.time_us[0] : view.end - view.start;
  const colour = nameColour(series.name, p.dark);
  ctx.save();
  ctx.beginPath();
  ctx.rect(GUTTER_PX, y, scene.width - GUTTER_PX, h);
  ctx.clip();
  ctx.beginPath();
  ctx.moveTo(GUTTER_PX + (series.time_us[0] - view.start) / upp, base);
  for (let i = 0; i < n; i += 1) {
    const v = values[i] ?? 0;
    const xa = GUTTER_PX + (series.time_us[i] - view.start) / upp;
    const next = i + 1 < n ? series.time_us[i + 1] : series.time_us[i] + bucket;
    const xb = GUTTER_PX + (next - view.start) / upp;
    ctx.lineTo(xa, base - v * scale);
    ctx.lineTo(xb, base - v * scale);
  }
  const last = series.time_us[n - 1] + bucket;
  ctx.lineTo(GUTTER_PX + (last - view.start) / upp, base);
  ctx.closePath();
  ctx.globalAlpha = 0.55;
  ctx.fillStyle = colour;
  ctx.fill();
  ctx.globalAlpha = 1;
  ctx.strokeStyle = colour;
  ctx.stroke();
  ctx.fillStyle = p.border;
  ctx.fillRect(GUTTER_PX, y + h - 1, scene.width - GUTTER_PX, 1);
  ctx.restore();
}

/** Canvas [top, height] of a track's band (all its lanes), or null when it is not shown. */
export function trackBand(scene: Pick<Scene, 'layout' | 'scrollTop'>, track: number): [number, number] | null {
  const y = laneY(scene, track, 0);
  if (y === null) return null;
  const row = scene.layout.rows.find((r) => r.type === 'track' && r.track.track === track);
  return row ? [y - 1, row.h - TRACK_GAP_PX] : null;
}

/** The critical path over the slices: everything off the path dimmed, each segment tinted and
 *  marked along its track's top in its category's colour, the path's bands outlined, and an
 *  arrow wherever the path moves to another track (drawn like flow arrows). */
function drawPath(ctx: CanvasRenderingContext2D, scene: Scene, drawn: Drawn) {
  const path = scene.path as PathScene;
  const { width: W, height: H, palette: p } = scene;
  const bandOf = new Map<number, [number, number] | null>();
  const band = (track: number) => {
    if (!bandOf.has(track)) bandOf.set(track, trackBand(scene, track));
    return bandOf.get(track) ?? null;
  };
  const x = (t: number) => xOf(scene, t);
  const bands = pathBands(path.segments, x, GUTTER_PX, W, 2).filter(([track]) => band(track) !== null);
  ctx.save();
  ctx.beginPath();
  ctx.rect(GUTTER_PX, RULER_PX, W - GUTTER_PX, H - RULER_PX);
  for (const [track, x0, x1] of bands) {
    const [y, h] = band(track) as [number, number];
    ctx.rect(x0, y, x1 - x0, h);
  }
  ctx.fillStyle = p.bg;
  ctx.globalAlpha = 0.72;
  ctx.fill('evenodd');
  ctx.restore();
  path.segments.forEach((s, i) => {
    const b = s.track >= 0 ? band(s.track) : null;
    if (!b) return;
    const x0 = x(s.start);
    const x1 = Math.max(x(s.end), x0 + 1);
    if (x1 < GUTTER_PX || x0 > W) return;
    drawn.pathSegments += 1;
    const colour = categoryColour(s.category);
    ctx.fillStyle = colour;
    ctx.globalAlpha = 0.2;
    ctx.fillRect(x0, b[0], x1 - x0, b[1]);
    ctx.globalAlpha = 1;
    ctx.fillRect(x0, b[0], x1 - x0, 4);
    if (i === path.hover || i === path.selected) {
      ctx.strokeStyle = i === path.selected ? PATH_COLOUR : p.fg;
      ctx.lineWidth = 2;
      ctx.strokeRect(Math.max(x0, GUTTER_PX - 4) - 1, b[0] - 1, Math.min(x1, W + 4) - Math.max(x0, GUTTER_PX - 4) + 2, b[1] + 2);
      ctx.lineWidth = 1;
    }
  });
  ctx.strokeStyle = PATH_COLOUR;
  ctx.lineWidth = 1.5;
  for (const [track, x0, x1] of bands) {
    const [y, h] = band(track) as [number, number];
    ctx.strokeRect(x0, y, x1 - x0, h);
  }
  ctx.lineWidth = 1;
  for (const [from, to] of path.arrows) {
    const a = path.segments[from];
    const b = path.segments[to];
    const ba = band(a.track);
    const bb = band(b.track);
    if (!ba || !bb) continue;
    const xa = x(a.end);
    const xb = x(b.start);
    if (Math.max(xa, xb) < GUTTER_PX || Math.min(xa, xb) > W) continue;
    drawArrow(ctx, xa, ba[0] + LANE_PX / 2, xb, bb[0] + LANE_PX / 2, PATH_COLOUR);
    drawn.pathArrows += 1;
  }
}

function drawArrow(ctx: CanvasRenderingContext2D, xa: number, ya: number, xb: number, yb: number, colour: string) {
  const dx = Math.max(Math.abs(xb - xa) / 2, 20);
  ctx.strokeStyle = colour;
  ctx.fillStyle = colour;
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  ctx.arc(xa, ya, 2.5, 0, Math.PI * 2);
  ctx.fill();
  ctx.beginPath();
  ctx.moveTo(xa, ya);
  ctx.bezierCurveTo(xa + dx, ya, xb - dx, yb, xb, yb);
  ctx.stroke();
  // head pointing along the curve's end tangent (horizontal, towards xb)
  ctx.beginPath();
  ctx.moveTo(xb, yb);
  ctx.lineTo(xb - 8, yb - 4);
  ctx.lineTo(xb - 8, yb + 4);
  ctx.closePath();
  ctx.fill();
  ctx.lineWidth = 1;
}

function drawRuler(ctx: CanvasRenderingContext2D, scene: Scene, plotW: number) {
  const { width: W, view, palette: p } = scene;
  ctx.fillStyle = p.panel;
  ctx.fillRect(0, 0, W, RULER_PX);
  ctx.fillStyle = p.border;
  ctx.fillRect(0, RULER_PX - 1, W, 1);
  // steps: alternating bands with their number
  scene.steps.forEach((step, i) => {
    const xa = Math.max(xOf(scene, step.start_us), GUTTER_PX);
    const xb = Math.min(xOf(scene, step.end_us), W);
    if (xb <= GUTTER_PX || xa >= W) return;
    ctx.fillStyle = p.accent;
    ctx.globalAlpha = i % 2 ? 0.18 : 0.32;
    ctx.fillRect(xa, 20, xb - xa, RULER_PX - 21);
    ctx.globalAlpha = 1;
    const label = fitText(`step ${step.step}`, xb - xa - 6, CHAR_PX);
    if (label) {
      ctx.fillStyle = p.fg;
      ctx.fillText(label, xa + 4, 28);
    }
  });
  const spec = ticks(view, plotW);
  ctx.fillStyle = p.fg;
  ctx.strokeStyle = p.muted;
  ctx.beginPath();
  for (const t of spec.values) {
    const x = Math.round(xOf(scene, t)) + 0.5;
    if (x < GUTTER_PX) continue;
    ctx.moveTo(x, 12);
    ctx.lineTo(x, 20);
    const label = tickLabel(t, spec);
    if (x + 3 + label.length * CHAR_PX <= W) ctx.fillText(label, x + 3, 8);
  }
  ctx.stroke();
  ctx.fillStyle = p.muted;
  ctx.fillText(`${formatDuration(view.end - view.start)} shown`, 6, 9);
  ctx.fillText('W/S zoom · A/D pan · wheel', 6, 27);
}
