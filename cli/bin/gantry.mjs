#!/usr/bin/env node
// The installed package runs the compiled CLI (dist/, made by `npm pack`); in the repository there
// is no dist/ and the TypeScript source runs through tsx, a dependency of the repository.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { supportedNode, unsupportedNodeMessage } from './node-version.mjs';

const compiled = new URL('../dist/index.js', import.meta.url);
if (!supportedNode(process.versions.node)) {
  // In the repository, its bootstrap fetches a supported Node once per machine and runs the CLI on it.
  const bootstrap = new URL('../../tooling/bootstrap.mjs', import.meta.url);
  if (existsSync(compiled) || !existsSync(bootstrap)) {
    console.error(unsupportedNodeMessage(process.version));
    process.exit(1);
  }
  const args = [fileURLToPath(bootstrap), 'node', fileURLToPath(import.meta.url), ...process.argv.slice(2)];
  const r = spawnSync(process.execPath, args, { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
if (existsSync(compiled)) {
  await import(compiled.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(new URL('../src/index.ts', import.meta.url).href);
}
