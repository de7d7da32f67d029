// Wire types: the JSON the routes answer, as tb_plugin/openapi.yaml describes it.
// Durations are microseconds (`_us`), sizes bytes (`_bytes`). Tables arrive as
// {columns, rows} and are turned into row objects once, by components/table/logic.rowsOf.

import type { Cell } from '../components/table/logic';

export interface WireTable {
  columns: string[];
  rows: Cell[][];
}

export interface RunError {
  worker: string;
  span: number;
  path: string;
  reason: string;
}

export interface RunInfo {
  name: string;
  workers: string[];
  spans: number;
  files: number;
  loaded: number;
  loading: boolean;
  errors: RunError[];
}

export interface RunsReply {
  runs: RunInfo[];
  scan_error: string;
}

export interface SpansReply {
  run: string;
  worker: string;
  spans: { span: number; stamp: number | null; file: string }[];
}

export type ViewName = 'overview' | 'operator' | 'kernel' | 'memory' | 'module' | 'distributed' | 'diff';

export interface ViewsReply {
  run: string;
  views: ViewName[];
}

export interface Recommendation {
  id: string;
  severity: 'warning' | 'info';
  text: string;
  numbers: Record<string, number>;
}

export interface OverviewReply {
  environment: Record<string, unknown>;
  steps: WireTable;
  step_mean: Record<string, number>;
  gpu_summary: WireTable;
  recommendations: Recommendation[];
}

export interface StackFrame {
  file: string | null;
  line: number | null;
  function: string;
  text: string;
}

export interface OperatorStack {
  calls: number;
  host_self_us: number;
  host_total_us: number;
  device_self_us: number;
  device_total_us: number;
  frames: StackFrame[];
}

export interface OperatorStacksReply {
  name: string;
  input_shape: string | null;
  stacks: OperatorStack[];
}

export interface TensorCoreShare {
  tensor_cores_us: number;
  other_us: number;
  tensor_cores_pct: number | null;
}

export interface MemoryDevicesReply {
  devices: string[];
}

export interface MemoryPeaks {
  device: string;
  peak_allocated_bytes: number | null;
  peak_allocated_us: number | null;
  peak_reserved_bytes: number | null;
  total_memory_bytes: number | null;
}

export interface MemoryCurveReply {
  device: string;
  peaks: MemoryPeaks;
  curve: WireTable;
}

export interface FlameNode {
  name: string;
  value: number;
  children: FlameNode[];
}

/** A 4xx/5xx reply body. */
export interface ErrorReply {
  error: string;
  reason: string;
  path?: string;
}

/** The 202 reply of a profile still being parsed. */
export interface LoadingReply {
  loading: true;
  path: string;
  elapsed_seconds?: number;
}

/** What every view gets from the shell: the selected profile and the known runs. */
export interface ViewProps {
  run: string;
  worker: string;
  span: number;
  runs: RunInfo[];
}
