/// <reference types="vitest/config" />
// Builds the page TensorBoard embeds into ../tb_plugin/static (committed, so `pip install`
// needs no Node). Output is flat with fixed names: the plugin serves only the files directly
// in static/, and fixed names keep the committed bundle's diff readable.
import { defineConfig } from 'vite';

export default defineConfig({
  base: './',
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
