// The layering of src/ (STYLE.md house rule 10), as an allowlist per layer: base/ has no UI and
// imports nothing of ours but base/; api/ imports base/ only; components/ no view and not the
// shell; a view imports no other view.

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

const layer = (path: string) => (path.includes('/') ? path.split('/')[0] : path.replace(/\.tsx?$/, ''));

// Each layer -> the layers its files may import (after Perfetto's check_imports.py: an
// allowlist, so a new layer or an import the list does not name fails). A view imports no
// other view (checked below).
const ALLOWED: Record<string, string[]> = {
  base: ['base'],
  api: ['api', 'base'],
  components: ['components', 'api', 'base'],
  views: ['views', 'components', 'api', 'base'],
  app: ['app', 'views', 'components', 'api', 'base'],
  main: ['app', 'base', 'styles'],
};

/** The edges of `edges` the allowlist refuses (a file in no listed layer too). */
function refused(edges: [string, string][]): [string, string][] {
  return edges.filter(([from, to]) => !(ALLOWED[layer(from)] ?? []).includes(layer(to)));
}

describe('source layering', () => {
  const edges = imports();
  it('finds the imports', () => {
    expect(edges.length).toBeGreaterThan(40);
  });
  it('imports only what each layer\'s allowlist entry names', () => {
    expect(refused(edges)).toEqual([]);
  });
  it('refuses what the layering forbids', () => {
    expect(refused([['api/tables.ts', 'components/table/logic']])).toHaveLength(1);
    expect(refused([['base/url.ts', 'api/client']])).toHaveLength(1);
    expect(refused([['components/Status.tsx', 'views/job/JobView']])).toHaveLength(1);
    expect(refused([['newlayer/x.ts', 'base/url']])).toHaveLength(1);
    expect(refused([['components/Status.tsx', 'api/useApi']])).toEqual([]);
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

describe('one unit system', () => {
  it('names memory sizes in binary units only (KiB, MiB, GiB: the sizes are powers of 1024, as the CLI writes them)', () => {
    // "KB", "MB", "GB", "TB" as a word, not a rate ("GB/s" is decimal bandwidth, on purpose)
    const decimal = /(?<![A-Za-z])[KMGT]B(?![A-Za-z/])/;
    const offenders = sources(SRC)
      .filter((file) => !file.endsWith('schema.d.ts'))
      .flatMap((file) => readFileSync(file, 'utf8').split('\n').map((line, i) => [relative(SRC, file), i + 1, line] as const))
      .filter(([, , line]) => decimal.test(line));
    expect(offenders).toEqual([]);
  });
});
