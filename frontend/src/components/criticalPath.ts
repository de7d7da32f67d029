// The categories of a step's critical path (the `category` column of /critical_path), named
// and coloured once for the two views that show them: the GPU idle tab's panel and the path
// drawn on the Trace view's timeline.

export const CATEGORY_LABELS: Record<string, string> = {
  cpu: 'CPU',
  launch: 'Launch',
  kernel: 'Kernel',
  memcpy: 'Memcpy',
  memset: 'Memset',
  sync: 'Sync (CPU waits on GPU)',
  stream_wait: 'Wait on another stream',
  thread_wait: 'Wait on another CPU thread',
  gpu_idle: 'GPU idle on the stream',
};

/** A category's colour on the timeline: CPU-side work warm, device work cool, waits grey. */
const COLOURS: Record<string, string> = {
  cpu: '#ef6c00',
  launch: '#f9a825',
  kernel: '#1e88e5',
  memcpy: '#00897b',
  memset: '#43a047',
  sync: '#e53935',
  stream_wait: '#8e24aa',
  thread_wait: '#6d4c41',
  gpu_idle: '#9e9e9e',
};

export function categoryLabel(category: string): string {
  return CATEGORY_LABELS[category] ?? category;
}

/** A category's colour; one the page does not know yet (a newer server) is drawn dark grey. */
export function categoryColour(category: string): string {
  return COLOURS[category] ?? '#616161';
}
