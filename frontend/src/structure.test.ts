// The layering of src/ (STYLE.md house rule 10): base/ has no UI and imports nothing of ours
// but base/; api/ and components/ never import views/ or app/; a view imports no other view.

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = dirname(fileURLToPath(import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return /\.tsx?$/.test(name) && !name.endsWith('.test.ts') ? [path] : [];
  });
}

/** [importing file, imported file] for every relative import, both relative to src/. */
function imports(): [string, string][] {
  return sources(SRC).flatMap((file) => {
    const text = readFileSync(file, 'utf8');
    return [...text.matchAll(/(?:import|export)[^'"]*?from\s+'(\.[^']+)'/g)].map(
      (m) => [relative(SRC, file), relative(SRC, resolve(dirname(file), m[1]))] as [string, string],
    );
  });
}

const layer = (path: string) => path.split('/')[0];

describe('source layering', () => {
  const edges = imports();
  it('finds the imports', () => {
    expect(edges.length).toBeGreaterThan(40);
  });
  it('keeps base/ free of everything else', () => {
    expect(edges.filter(([from, to]) => layer(from) === 'base' && layer(to) !== 'base')).toEqual([]);
  });
  it('keeps api/ and components/ below the views and the shell', () => {
    const bad = edges.filter(([from, to]) => ['api', 'components'].includes(layer(from)) && ['views', 'app'].includes(layer(to)));
    expect(bad).toEqual([]);
  });
  it('never lets a view import another view', () => {
    const view = (path: string) => (layer(path) === 'views' ? path.split('/')[1] : null);
    const bad = edges.filter(([from, to]) => view(from) && view(to) && view(from) !== view(to));
    expect(bad).toEqual([]);
  });
  it('never inserts HTML from data', () => {
    const offenders = sources(SRC).filter((file) => /innerHTML|dangerouslySetInnerHTML|insertAdjacentHTML|document\.write/.test(readFileSync(file, 'utf8')));
    expect(offenders.map((f) => relative(SRC, f))).toEqual([]);
  });
});
