// A flame graph of the module tree, drawn with positioned elements (names are text).
// Width is host total time; click a frame to zoom into it, a breadcrumb to zoom out.

import { useMemo, useState } from 'preact/hooks';
import type { FlameNode } from '../../api/types';
import { formatDuration, formatNumber } from '../../base/format';

interface Placed {
  node: FlameNode;
  path: number[];
  depth: number;
  x: number;
  w: number;
}

const ROW = 22;

function hue(name: string): number {
  let h = 0;
  for (let i = 0; i < name.length; i += 1) h = (h * 31 + name.charCodeAt(i)) >>> 0;
  return 20 + (h % 40); // warm colours, like flame graphs
}

function layout(root: FlameNode, rootPath: number[]): Placed[] {
  const out: Placed[] = [];
  const total = root.value || 1;
  const walk = (node: FlameNode, path: number[], depth: number, x: number, w: number) => {
    out.push({ node, path, depth, x, w });
    let offset = x;
    const sum = node.children.reduce((s, c) => s + Math.max(c.value, 0), 0);
    // Children can exceed their parent when the tree merges repeated calls: scale them in.
    const scale = sum > node.value && sum > 0 ? node.value / sum : 1;
    node.children.forEach((child, i) => {
      const cw = (Math.max(child.value, 0) / total) * scale;
      if (cw > 0.0005) walk(child, [...path, i], depth + 1, offset, cw);
      offset += cw;
    });
  };
  walk(root, rootPath, 0, 0, 1);
  return out;
}

/** A frame's text: name and host total, and the modules folded into it (drawn no deeper). */
export function flameLabel(node: FlameNode): string {
  const folded = node.folded ? ` (+${formatNumber(node.folded)} deeper modules, not drawn)` : '';
  return `${node.name} ${formatDuration(node.value)}${folded}`;
}

export function Flame({ tree }: { tree: FlameNode }) {
  const [focus, setFocus] = useState<number[]>([]);
  const chain = useMemo(() => {
    const nodes = [tree];
    for (const i of focus) {
      const next = nodes[nodes.length - 1].children[i];
      if (!next) break;
      nodes.push(next);
    }
    return nodes;
  }, [tree, focus]);
  const root = chain[chain.length - 1];
  const placed = useMemo(() => layout(root, focus.slice(0, chain.length - 1)), [root]);
  const depth = placed.reduce((d, p) => Math.max(d, p.depth), 0) + 1;
  return (
    <div data-testid="module-flame">
      <div class="crumbs">
        {chain.map((node, i) => (
          <button type="button" key={i} disabled={i === chain.length - 1} onClick={() => setFocus(focus.slice(0, i))}>
            {node.name}
          </button>
        ))}
      </div>
      <div class="flame" style={{ height: `${depth * ROW + 2}px` }}>
        {placed.map((p) => (
          <div
            key={p.path.join('.')}
            class="flame-node"
            title={`${flameLabel(p.node)}\nHost total: ${formatDuration(p.node.value)} (${((100 * p.node.value) / (root.value || 1)).toFixed(1)} % of ${root.name})`}
            style={{ left: `${p.x * 100}%`, width: `${p.w * 100}%`, top: `${p.depth * ROW}px`, background: `hsl(${hue(p.node.name)} 85% 62%)` }}
            onClick={() => (p.node.children.length && p.node !== root ? setFocus(p.path) : undefined)}
          >
            {flameLabel(p.node)}
          </div>
        ))}
      </div>
    </div>
  );
}
