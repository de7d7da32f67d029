// The views the shell can show, in tab order. Views never import each other.

import type { FunctionComponent } from 'preact';
import type { ViewName, ViewProps } from '../api/types';
import { CompiledView } from '../views/compiled/CompiledView';
import { DiffView } from '../views/diff/DiffView';
import { DistributedView } from '../views/distributed/DistributedView';
import { GpuIdleView } from '../views/gpu_idle/GpuIdleView';
import { JobView } from '../views/job/JobView';
import { KernelView } from '../views/kernel/KernelView';
import { LightningView } from '../views/lightning/LightningView';
import { MemoryView } from '../views/memory/MemoryView';
import { SnapshotView } from '../views/memory_snapshot/SnapshotView';
import { ModuleView } from '../views/module/ModuleView';
import { OperatorView } from '../views/operator/OperatorView';
import { OverviewView } from '../views/overview/OverviewView';
import { TraceView } from '../views/trace/TraceView';

export const VIEWS: { name: ViewName; label: string; component: FunctionComponent<ViewProps> }[] = [
  { name: 'overview', label: 'Overview', component: OverviewView },
  { name: 'operator', label: 'Operator', component: OperatorView },
  { name: 'kernel', label: 'Kernel', component: KernelView },
  { name: 'gpu_idle', label: 'GPU idle', component: GpuIdleView },
  { name: 'compiled', label: 'Compiled', component: CompiledView },
  { name: 'trace', label: 'Trace', component: TraceView },
  { name: 'memory', label: 'Memory', component: MemoryView },
  { name: 'memory_snapshot', label: 'Memory snapshot', component: SnapshotView },
  { name: 'module', label: 'Module', component: ModuleView },
  { name: 'lightning', label: 'Lightning', component: LightningView },
  { name: 'job', label: 'Job', component: JobView },
  { name: 'distributed', label: 'Distributed', component: DistributedView },
  { name: 'diff', label: 'Diff', component: DiffView },
];
