import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// Built into the server package's dist/web, served at /ui/ (and /docs) by sandboxd itself.
export default defineConfig({
  base: '/ui/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../dist/web', import.meta.url)),
    emptyOutDir: true,
    // One small bundle; no source maps in the shipped package.
    sourcemap: false,
  },
});
