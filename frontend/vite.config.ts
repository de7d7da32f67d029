/// <reference types="vitest/config" />
// Builds the page TensorBoard embeds into ../tb_plugin/static (committed, so `pip install`
// needs no Node). Output is flat with fixed names: the plugin serves only the files directly
// in static/, and fixed names keep the committed bundle's diff readable.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { load } from 'js-yaml';
import { defineConfig, type Plugin } from 'vite';

const SPEC = fileURLToPath(new URL('../tb_plugin/openapi.yaml', import.meta.url));
const COLUMN_DOCS = 'virtual:column-docs';

interface TableComponent {
  properties: { rows: { items: { prefixItems: { title: string; description: string }[] } } };
}

/** `import columnDocs from 'virtual:column-docs'`: every declared table's column meanings,
 *  {"KernelsByNameTable": {"total_us": "... (µs)"}}, read at build time from the table
 *  components of openapi.yaml, which `python -m tb_plugin.openapi_gen` writes from the
 *  Python declarations. The page's header definitions are thus the declarations' own
 *  words, with no copy kept here; a stale bundle fails CI like any other. */
function columnDocs(): Plugin {
  return {
    name: 'column-docs',
    resolveId: (source) => (source === COLUMN_DOCS ? `\0${COLUMN_DOCS}` : null),
    load(id) {
      if (id !== `\0${COLUMN_DOCS}`) return null;
      this.addWatchFile(SPEC);
      const spec = load(readFileSync(SPEC, 'utf8')) as { components: { schemas: Record<string, TableComponent> } };
      const docs = Object.fromEntries(
        Object.entries(spec.components.schemas)
          .filter(([name]) => name.endsWith('Table'))
          .map(([name, table]) => [name, Object.fromEntries(table.properties.rows.items.prefixItems.map((cell) => [cell.title, cell.description]))]),
      );
      return `export default ${JSON.stringify(docs)};`;
    },
  };
}

export default defineConfig({
  base: './',
  plugins: [columnDocs()],
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: '../tb_plugin/static',
    emptyOutDir: true,
    assetsDir: '',
    target: 'es2020',
    modulePreload: { polyfill: false },
    reportCompressedSize: true,
    chunkSizeWarningLimit: 1500,
    rolldownOptions: {
      output: {
        entryFileNames: 'app.js',
        chunkFileNames: '[name].js',
        assetFileNames: '[name][extname]',
      },
    },
  },
  test: {
    include: ['src/**/*.test.ts'],
    environment: 'node',
  },
});
