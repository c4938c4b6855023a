import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { InlineConfig } from 'vite';

/** The console's source folder (index.html and src/). */
export const CONSOLE_ROOT = path.dirname(fileURLToPath(import.meta.url));

/**
 * How Vite builds the console (api/console/build.ts runs it; never a dev server): Preact's JSX
 * through esbuild, served under /console/, and nothing the page's CSP (api/console/routes.ts)
 * would refuse: no module-preload polyfill, no asset inlined as a data: script or style, the
 * stylesheets (uPlot's included) as files.
 */
export function consoleViteConfig(outDir: string): InlineConfig {
  return {
    configFile: false,
    root: CONSOLE_ROOT,
    base: '/console/',
    logLevel: 'warn',
    clearScreen: false,
    esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
    build: {
      outDir,
      emptyOutDir: true,
      modulePreload: { polyfill: false },
      assetsInlineLimit: 0,
      cssCodeSplit: false,
      sourcemap: false,
      reportCompressedSize: false,
      target: 'es2022',
    },
  };
}
