// The canvas timeline: draws (draw.ts) what the last replies hold at the current window and
// turns mouse and keys into window changes, selections and ranges:
// - wheel or ctrl+wheel over the tracks: zoom around the cursor; shift+wheel or wheel over
//   the names: scroll the tracks; horizontal wheel: pan;
// - drag: pan; shift+drag: select a range (per-name totals below); click: select an event
//   (and, with a critical path drawn, the path's segment there); click a process header:
//   collapse or expand it; hover a path segment: its category, duration and operator;
// - W/S zoom in/out and A/D pan (as in chrome://tracing), Escape clears the selection.
// The box carries data-* attributes describing what is on screen, for tests and benchmarks.

import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import type { CounterSeries, TimelineEndpoint, TimelineFlow } from '../../api/types';
import { formatDuration, formatNumber } from '../../base/format';
import { categoryLabel } from '../../components/criticalPath';
import { useThemeValue } from '../../components/theme';
import { counterText, draw, GUTTER_PX, laneY, RULER_PX, timeAt, trackBand, xOf, type Drawn, type Palette, type Range, type Scene, type Step } from './draw';
import { hitSlice, LANE_PX, panBy, pathSegmentAt, rowAt, seriesOf, tracksBetween, zoomAt, type Layout, type PathSegment, type SliceData, type Window } from './logic';

export interface SliceHit {
  index: number;
  event: number;
  track: number;
  lane: number;
  start: number;
  dur: number;
  count: number;
  busy: number;
  name: string;
}

export interface TimelineProps {
  layout: Layout;
  limit: Window;
  view: Window;
  onView: (view: Window) => void;
  slices: SliceData | null;
  counters: CounterSeries[] | null;
  steps: Step[];
  selected: TimelineEndpoint | null;
  onSelect: (hit: SliceHit | null) => void;
  flows: TimelineFlow[];
  range: Range | null;
  onRange: (range: Range | null) => void;
  onToggle: (key: string) => void;
  /** Bumped to scroll the selected event's track into view. */
  reveal: number;
  /** A track to bring into view (a critical path just opened: its topmost track); `n`
   *  changes each time it is asked for. */
  focusTrack?: { track: number; n: number } | null;
  onPlotWidth: (px: number) => void;
  requests: number;
  /** A step's critical path drawn over the tracks (null: none), its selected segment (-1:
   *  none) and what a click on one of its segments does. */
  path?: { step: number; segments: PathSegment[]; arrows: [number, number][] } | null;
  pathSelected?: number;
  onPathSelect?: (segment: number) => void;
}

const ZOOM_KEY = 1.3;
const PAN_KEY = 0.15;

function palette(): Palette {
  const style = getComputedStyle(document.documentElement);
  const v = (name: string, fallback: string) => style.getPropertyValue(name).trim() || fallback;
  return {
    bg: v('--bg', '#fff'),
    fg: v('--fg', '#212121'),
    muted: v('--muted', '#616161'),
    border: v('--border', '#e0e0e0'),
    panel: v('--panel', '#f5f5f5'),
    accent: v('--accent', '#f57c00'),
    dark: document.documentElement.classList.contains('dark'),
  };
}

function hitOf(data: SliceData, i: number): SliceHit {
  const r = data.reply;
  return { index: i, event: r.event[i], track: r.track[i], lane: r.lane[i], start: r.start_us[i], dur: r.dur_us[i], count: r.count[i], busy: r.busy_us[i], name: r.names[r.name[i]] };
}

export function Timeline(props: TimelineProps) {
  const theme = useThemeValue();
  const scroller = useRef<HTMLDivElement>(null);
  const canvas = useRef<HTMLCanvasElement>(null);
  const [size, setSize] = useState({ width: 0, height: 0 });
  const [tip, setTip] = useState<{ x: number; y: number; lines: string[] } | null>(null);
  const live = useRef({
    props,
    scrollTop: 0,
    hover: -1,
    pathHover: -1,
    mouse: null as { x: number; y: number } | null,
    drag: null as null | { x: number; y: number; view: Window; box: boolean; moved: boolean },
    box: null as Scene['box'],
    frame: 0,
    firstPaint: false,
    palette: null as Palette | null,
    width: 0,
    height: 0,
  });
  const height = Math.max(180, Math.min(RULER_PX + props.layout.height + 2, Math.max(360, Math.round(window.innerHeight * 0.62))));
  live.current.props = props;
  live.current.width = size.width;
  live.current.height = height;

  const scene = (): Scene => {
    const s = live.current;
    const p = s.props;
    return {
      width: s.width,
      height: s.height,
      scrollTop: s.scrollTop,
      view: p.view,
      layout: p.layout,
      slices: p.slices,
      counters: p.counters,
      steps: p.steps,
      selected: p.selected,
      hover: s.hover,
      flows: p.flows,
      range: p.range,
      box: s.box,
      path: p.path ? { segments: p.path.segments, arrows: p.path.arrows, hover: s.pathHover, selected: p.pathSelected ?? -1 } : null,
      palette: s.palette ?? (s.palette = palette()),
    };
  };

  const paint = () => {
    const s = live.current;
    s.frame = 0;
    const el = canvas.current;
    if (!el || s.width <= 0) return;
    const dpr = window.devicePixelRatio || 1;
    const w = Math.round(s.width * dpr);
    const h = Math.round(s.height * dpr);
    if (el.width !== w || el.height !== h) {
      el.width = w;
      el.height = h;
    }
    const ctx = el.getContext('2d');
    if (!ctx) return;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const sc = scene();
    const drawn: Drawn = draw(ctx, sc);
    debugHook(el, sc);
    const box = scroller.current;
    const p = s.props;
    if (box) {
      const d = box.dataset;
      d.startUs = String(p.view.start);
      d.endUs = String(p.view.end);
      d.slicesDrawn = String(drawn.slices);
      d.blocksDrawn = String(drawn.blocks);
      d.coloursDrawn = String(drawn.colours);
      d.arrows = String(drawn.arrows);
      d.requests = String(p.requests);
      d.selectedEvent = p.selected ? String(p.selected.event) : '';
      d.pathStep = p.path ? String(p.path.step) : '';
      d.pathSegmentsDrawn = String(drawn.pathSegments);
      d.pathArrowsDrawn = String(drawn.pathArrows);
    }
    if (!s.firstPaint && p.slices && drawn.slices + drawn.blocks > 0) {
      s.firstPaint = true;
      performance.mark('trace-first-paint');
      if (box) box.dataset.firstPaintMs = String(Math.round(performance.now()));
    }
  };

  const requestPaint = () => {
    const s = live.current;
    if (!s.frame) s.frame = requestAnimationFrame(paint);
  };

  useEffect(() => () => cancelAnimationFrame(live.current.frame), []);

  // Size: the box's width; the plot is what the names leave.
  useLayoutEffect(() => {
    const el = scroller.current;
    if (!el) return undefined;
    const measure = () => setSize((old) => (old.width === el.clientWidth ? old : { width: el.clientWidth, height }));
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(el);
    return () => observer.disconnect();
  }, []);
  useLayoutEffect(() => {
    if (size.width > 0) props.onPlotWidth(size.width - GUTTER_PX);
  }, [size.width]);

  useLayoutEffect(() => {
    live.current.palette = null;
    requestPaint();
  }, [theme]);
  useLayoutEffect(requestPaint, [props.view, props.slices, props.counters, props.layout, props.selected, props.flows, props.range, size, height, props.requests, props.path, props.pathSelected]);

  // Scroll the selected event's track into view when asked.
  useLayoutEffect(() => {
    const el = scroller.current;
    const sel = props.selected;
    if (!el || !sel || !props.reveal) return;
    const top = props.layout.trackTop.get(sel.track);
    if (top === undefined) return;
    const y = top + sel.lane * LANE_PX;
    const visible = live.current.height - RULER_PX;
    if (y < el.scrollTop || y + LANE_PX > el.scrollTop + visible) {
      el.scrollTop = Math.max(0, y - visible / 3);
      live.current.scrollTop = el.scrollTop;
      requestPaint();
    }
  }, [props.reveal]);

  // Scroll a track asked for to the top third of the tracks, unless it is already shown, and
  // keep it shown while rows above it arrive (counters load after the tracks), until the
  // user scrolls the tracks themselves.
  const focus = useRef<{ asked: TimelineProps['focusTrack']; pending: boolean; ownScroll: boolean }>({ asked: null, pending: false, ownScroll: false });
  useLayoutEffect(() => {
    const el = scroller.current;
    const f = focus.current;
    if (props.focusTrack !== f.asked) {
      f.asked = props.focusTrack;
      f.pending = !!props.focusTrack;
    }
    if (!el || !f.pending || !f.asked) return;
    const top = props.layout.trackTop.get(f.asked.track);
    if (top === undefined) return;
    const visible = live.current.height - RULER_PX;
    const next = Math.max(0, top - visible / 3);
    if ((top < el.scrollTop || top + LANE_PX > el.scrollTop + visible) && next !== el.scrollTop) {
      f.ownScroll = true; // the scroll event this causes is not the user's
      el.scrollTop = next;
      live.current.scrollTop = el.scrollTop;
      requestPaint();
    }
  }, [props.focusTrack, props.layout]);

  // Wheel (not passive: it must not scroll the page while zooming).
  useEffect(() => {
    const el = scroller.current;
    if (!el) return undefined;
    const onWheel = (event: WheelEvent) => {
      const rect = el.getBoundingClientRect();
      const x = event.clientX - rect.left;
      const unit = event.deltaMode === 1 ? 16 : event.deltaMode === 2 ? 400 : 1;
      const p = live.current.props;
      if (event.shiftKey || x < GUTTER_PX) return; // the tracks scroll natively
      event.preventDefault();
      const plot = el.clientWidth - GUTTER_PX;
      if (Math.abs(event.deltaX) > Math.abs(event.deltaY)) {
        p.onView(panBy(p.view, (event.deltaX * unit) / plot, p.limit));
        return;
      }
      const factor = Math.exp((-event.deltaY * unit) / 300);
      p.onView(zoomAt(p.view, factor, (x - GUTTER_PX) / plot, p.limit));
    };
    el.addEventListener('wheel', onWheel, { passive: false });
    return () => el.removeEventListener('wheel', onWheel);
  }, []);

  // W/S/A/D anywhere on the page except in text fields.
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (event.ctrlKey || event.metaKey || event.altKey) return;
      const target = event.target as HTMLElement | null;
      if (target && (target.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(target.tagName))) return;
      const s = live.current;
      const p = s.props;
      const el = scroller.current;
      const plot = (el?.clientWidth ?? 0) - GUTTER_PX;
      const anchor = s.mouse && s.mouse.x >= GUTTER_PX && plot > 0 ? (s.mouse.x - GUTTER_PX) / plot : 0.5;
      const key = event.key.toLowerCase();
      if (key === 'w') p.onView(zoomAt(p.view, ZOOM_KEY, anchor, p.limit));
      else if (key === 's') p.onView(zoomAt(p.view, 1 / ZOOM_KEY, anchor, p.limit));
      else if (key === 'a') p.onView(panBy(p.view, -PAN_KEY, p.limit));
      else if (key === 'd') p.onView(panBy(p.view, PAN_KEY, p.limit));
      else if (key === 'escape') {
        p.onSelect(null);
        p.onRange(null);
      } else return;
      event.preventDefault();
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, []);

  const local = (event: MouseEvent) => {
    const rect = (canvas.current as HTMLCanvasElement).getBoundingClientRect();
    return { x: event.clientX - rect.left, y: event.clientY - rect.top };
  };

  /** The slice under canvas point (x, y), or -1. */
  const sliceAt = (x: number, y: number): number => {
    const s = live.current;
    const p = s.props;
    if (!p.slices || x < GUTTER_PX || y < RULER_PX) return -1;
    const row = rowAt(p.layout.rows, y - RULER_PX + s.scrollTop);
    if (!row || row.type !== 'track') return -1;
    const lane = Math.floor((y - RULER_PX + s.scrollTop - row.y) / LANE_PX);
    if (lane >= row.track.lanes) return -1;
    const sc = scene();
    const t = timeAt(sc, x);
    const upp = (p.view.end - p.view.start) / (s.width - GUTTER_PX);
    return hitSlice(p.slices, row.track.track, lane, t, 2 * upp);
  };

  /** The critical path's segment under canvas point (x, y), or -1. */
  const pathAt = (x: number, y: number): number => {
    const s = live.current;
    const p = s.props;
    if (!p.path || x < GUTTER_PX || y < RULER_PX) return -1;
    const row = rowAt(p.layout.rows, y - RULER_PX + s.scrollTop);
    if (!row || row.type !== 'track') return -1;
    const upp = (p.view.end - p.view.start) / (s.width - GUTTER_PX);
    return pathSegmentAt(p.path.segments, row.track.track, timeAt(scene(), x), 2 * upp);
  };

  const describe = (x: number, y: number): string[] | null => {
    const s = live.current;
    const p = s.props;
    const lines = describeSlice(x, y);
    const k = pathAt(x, y);
    if (k < 0 || !p.path) return lines;
    const seg = p.path.segments[k];
    const onPath = [`critical path, step ${p.path.step}: ${categoryLabel(seg.category)} · ${formatDuration(seg.dur)}`];
    if (seg.operator) onPath.push(`operator ${seg.operator}`);
    if (seg.name && seg.name !== lines?.[0]) onPath.push(seg.name);
    return lines ? [...lines, ...onPath] : [categoryLabel(seg.category), ...onPath];
  };

  const describeSlice = (x: number, y: number): string[] | null => {
    const s = live.current;
    const p = s.props;
    const i = sliceAt(x, y);
    if (i >= 0 && p.slices) {
      const h = hitOf(p.slices, i);
      if (h.event < 0) {
        return [h.name + ' …', `${formatNumber(h.count)} events merged (shorter than a pixel)`, `busy ${formatDuration(h.busy)} over ${formatDuration(h.dur)}`, 'click to zoom in'];
      }
      return [h.name, `${formatDuration(h.dur)} at ${formatDuration(h.start)}`];
    }
    const row = y >= RULER_PX ? rowAt(p.layout.rows, y - RULER_PX + s.scrollTop) : null;
    const series = row?.type === 'counter' && x >= GUTTER_PX ? seriesOf(p.counters, row) : undefined;
    if (series) {
      const t = timeAt(scene(), x);
      let k = -1;
      for (let j = 0; j < series.time_us.length && series.time_us[j] <= t; j += 1) k = j;
      if (k < 0) return [series.name];
      return [series.name, `${counterText(series, series.max[k])} (max of the bucket) at ${formatDuration(t)}`];
    }
    if (row?.type === 'header') return [row.label, row.collapsed ? 'click to expand' : 'click to collapse'];
    return null;
  };

  const onMouseDown = (event: MouseEvent) => {
    if (event.button !== 0) return;
    const { x, y } = local(event);
    const s = live.current;
    if (y >= RULER_PX) {
      const row = rowAt(s.props.layout.rows, y - RULER_PX + s.scrollTop);
      if (row?.type === 'header') {
        s.props.onToggle(row.key);
        return;
      }
    }
    if (x < GUTTER_PX) return;
    event.preventDefault();
    scroller.current?.focus({ preventScroll: true });
    s.drag = { x, y, view: s.props.view, box: event.shiftKey, moved: false };
    const move = (e: MouseEvent) => {
      const d = s.drag;
      if (!d) return;
      const at = local(e);
      if (Math.abs(at.x - d.x) + Math.abs(at.y - d.y) > 3) d.moved = true;
      if (!d.moved) return;
      if (d.box) {
        s.box = { x0: d.x, y0: Math.max(d.y, RULER_PX), x1: Math.max(GUTTER_PX, Math.min(at.x, s.width)), y1: Math.max(RULER_PX, Math.min(at.y, s.height)) };
        requestPaint();
      } else {
        const upp = (d.view.end - d.view.start) / (s.width - GUTTER_PX);
        const shift = (d.x - at.x) * upp;
        s.props.onView(panBy(d.view, shift / (d.view.end - d.view.start), s.props.limit));
      }
    };
    const up = (e: MouseEvent) => {
      window.removeEventListener('mousemove', move);
      window.removeEventListener('mouseup', up);
      const d = s.drag;
      s.drag = null;
      if (!d) return;
      const p = s.props;
      if (d.box && d.moved && s.box) {
        const b = s.box;
        s.box = null;
        const sc = scene();
        const t0 = timeAt(sc, Math.min(b.x0, b.x1));
        const t1 = timeAt(sc, Math.max(b.x0, b.x1));
        const tracks = tracksBetween(p.layout.rows, b.y0 - RULER_PX + s.scrollTop, b.y1 - RULER_PX + s.scrollTop);
        p.onRange({ start: t0, end: t1, tracks });
        requestPaint();
        return;
      }
      if (d.moved) return;
      const at = local(e);
      const k = pathAt(at.x, at.y);
      if (k >= 0) p.onPathSelect?.(k);
      const i = sliceAt(at.x, at.y);
      if (i < 0 || !p.slices) {
        p.onSelect(null);
        return;
      }
      const h = hitOf(p.slices, i);
      if (h.event < 0) {
        // a merged block: zoom in until its events come apart
        const pad = Math.max(h.dur * 0.25, 1);
        p.onView({ start: h.start - pad, end: h.start + h.dur + pad });
        return;
      }
      p.onSelect(h);
    };
    window.addEventListener('mousemove', move);
    window.addEventListener('mouseup', up);
  };

  const onMouseMove = (event: MouseEvent) => {
    const { x, y } = local(event);
    const s = live.current;
    s.mouse = { x, y };
    if (s.drag) return;
    const i = sliceAt(x, y);
    const k = pathAt(x, y);
    if (i !== s.hover || k !== s.pathHover) {
      s.hover = i;
      s.pathHover = k;
      requestPaint();
    }
    const lines = describe(x, y);
    setTip(lines ? { x, y, lines } : null);
  };

  const onMouseLeave = () => {
    const s = live.current;
    s.mouse = null;
    if (s.hover !== -1 || s.pathHover !== -1) {
      s.hover = -1;
      s.pathHover = -1;
      requestPaint();
    }
    setTip(null);
  };

  const contentHeight = RULER_PX + props.layout.height;
  return (
    <div
      class="trace-scroll"
      ref={scroller}
      tabIndex={0}
      role="application"
      aria-label="Trace timeline: W/S zoom, A/D pan, drag to pan, shift+drag to select a range, click an event for its details"
      data-testid="trace-timeline"
      style={{ height: `${height}px` }}
      onScroll={(e) => {
        if (focus.current.ownScroll) focus.current.ownScroll = false;
        else focus.current.pending = false; // the user moved: the track asked for is theirs to leave
        live.current.scrollTop = (e.currentTarget as HTMLDivElement).scrollTop;
        requestPaint();
      }}
    >
      <canvas
        ref={canvas}
        class="trace-canvas"
        style={{ width: `${size.width}px`, height: `${height}px` }}
        onMouseDown={onMouseDown}
        onMouseMove={onMouseMove}
        onMouseLeave={onMouseLeave}
      />
      <div style={{ height: `${Math.max(0, contentHeight - height)}px` }} />
      {tip ? (
        <div class="trace-tip" style={{ left: `${Math.min(tip.x + 14, Math.max(size.width - 360, 0))}px`, top: `${tip.y + 16 + live.current.scrollTop}px` }}>
          {tip.lines.map((line, i) => (
            <div key={i} class={i === 0 ? 'trace-tip-title' : ''}>{line}</div>
          ))}
        </div>
      ) : null}
    </div>
  );
}

/** For tests and benchmarks: `canvas.traceDebug.slices()` lists the single events on screen
 * with the canvas point at their middle (CSS pixels), so a test can click one. */
function debugHook(el: HTMLCanvasElement, sc: Scene) {
  (el as HTMLCanvasElement & { traceDebug?: unknown }).traceDebug = {
    slices: () => {
      const data = sc.slices;
      if (!data) return [];
      const r = data.reply;
      const out: { event: number; name: string; kind: string; track: number; lane: number; x: number; y: number; width: number }[] = [];
      for (let i = 0; i < r.track.length; i += 1) {
        if (r.event[i] < 0) continue;
        const y = laneY(sc, r.track[i], r.lane[i]);
        if (y === null || y < RULER_PX || y + LANE_PX > sc.height) continue;
        const x0 = Math.max(xOf(sc, r.start_us[i]), GUTTER_PX);
        const x1 = Math.min(xOf(sc, r.start_us[i] + r.dur_us[i]), sc.width);
        if (x1 - x0 < 1) continue;
        out.push({ event: r.event[i], name: r.names[r.name[i]], kind: r.kinds[r.kind[i]] ?? '', track: r.track[i], lane: r.lane[i], x: (x0 + x1) / 2, y: y + LANE_PX / 2 - 1, width: x1 - x0 });
      }
      return out;
    },
    /** The critical path's segments on screen, each with the canvas point at its middle. */
    path: () => {
      const path = sc.path;
      if (!path) return [];
      const out: { segment: number; category: string; track: number; x: number; y: number; width: number }[] = [];
      path.segments.forEach((s, i) => {
        const band = s.track >= 0 ? trackBand(sc, s.track) : null;
        if (!band || band[0] < RULER_PX || band[0] + LANE_PX > sc.height) return;
        const x0 = Math.max(xOf(sc, s.start), GUTTER_PX);
        const x1 = Math.min(xOf(sc, s.end), sc.width);
        if (x1 - x0 < 1) return;
        out.push({ segment: i, category: s.category, track: s.track, x: (x0 + x1) / 2, y: band[0] + LANE_PX / 2, width: x1 - x0 });
      });
      return out;
    },
    view: () => ({ ...sc.view }),
    rows: () =>
      sc.layout.rows.map((r) =>
        r.type === 'header' ? { type: r.type, label: r.label, collapsed: r.collapsed, y: RULER_PX + r.y - sc.scrollTop + r.h / 2 }
          : r.type === 'track' ? { type: r.type, label: r.track.thread, track: r.track.track, y: RULER_PX + r.y - sc.scrollTop + LANE_PX / 2 }
            : { type: r.type, label: r.label, name: r.name, y: RULER_PX + r.y - sc.scrollTop + r.h / 2 },
      ),
  };
}
