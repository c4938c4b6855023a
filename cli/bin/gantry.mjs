#!/usr/bin/env node
// The installed package runs the compiled CLI (dist/, made by `npm pack`); in the repository there
// is no dist/ and the TypeScript source runs through tsx, a dependency of the repository.
import { existsSync } from 'node:fs';

const compiled = new URL('../dist/index.js', import.meta.url);
if (existsSync(compiled)) {
  await import(compiled.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(new URL('../src/index.ts', import.meta.url).href);
}
