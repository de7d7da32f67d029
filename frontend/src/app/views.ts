// The page of each declared tab (`schema.tab`), and what its tab says. Which tabs a profile
// offers, and in which order, is the server's answer (/views, in the declared order); the
// Record's type makes the compiler refuse a declared tab (`ViewName`) without its page.
// Listed in the declared order, for a reader (tests/test_table_conformance.py checks it).
// Views never import each other.

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

export const VIEWS: Record<ViewName, { label: string; component: FunctionComponent<ViewProps> }> = {
  overview: { label: 'Overview', component: OverviewView },
  operator: { label: 'Operator', component: OperatorView },
  kernel: { label: 'Kernel', component: KernelView },
  gpu_idle: { label: 'GPU idle', component: GpuIdleView },
  memory: { label: 'Memory', component: MemoryView },
  module: { label: 'Module', component: ModuleView },
  trace: { label: 'Trace', component: TraceView },
  compiled: { label: 'Compiled', component: CompiledView },
  lightning: { label: 'Lightning', component: LightningView },
  job: { label: 'Job', component: JobView },
  distributed: { label: 'Distributed', component: DistributedView },
  diff: { label: 'Diff', component: DiffView },
  memory_snapshot: { label: 'Memory snapshot', component: SnapshotView },
};
