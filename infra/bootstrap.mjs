#!/usr/bin/env node
// The two README commands. Plain JavaScript with no dependencies, because it runs before `npm ci`:
//   npm start -> install what is missing, generate the Prisma client, run infra/start.ts
//   npm test  -> the same, plus a PostgreSQL server for the suite, then vitest
// and `npm run prisma:generate` -> regenerate the Prisma client now (after editing the schema).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const mtime = (p) => (existsSync(p) ? statSync(p).mtimeMs : 0);
const say = (msg) => console.error(`[gantry] ${msg}`);

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', ...opts });
  if (r.status !== 0) {
    say(`${cmd} ${args.join(' ')} failed (exit ${r.status ?? r.signal})`);
    process.exit(r.status ?? 1);
  }
}

/**
 * Installs when node_modules is missing or older than the lock file. `npm install` rather than
 * `npm ci`: the lock file is written without registry addresses (omit-lockfile-registry-resolved),
 * and npm 11 then leaves other platforms' optional packages out of it, which `npm ci` refuses.
 * With exact versions in package.json and the lock file present, `npm install` installs the same tree.
 */
function ensureDependencies() {
  const installed = path.join(root, 'node_modules', '.package-lock.json');
  if (mtime(installed) >= mtime(path.join(root, 'package-lock.json'))) return;
  say('installing dependencies (npm install)...');
  run('npm', ['install', '--no-audit', '--no-fund']);
}

/** The Prisma client is generated code (not committed); regenerate when the schema is newer. */
function ensurePrismaClient(force = false) {
  const generated = path.join(root, 'generated', 'prisma', 'client.ts');
  if (!force && mtime(generated) >= mtime(path.join(root, 'prisma', 'schema.prisma'))) return;
  say('generating the Prisma client...');
  // `prisma generate` needs no schema engine, but the CLI wants one configured; any executable will do.
  run(path.join(root, 'node_modules', '.bin', 'prisma'), ['generate'], {
    env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? process.execPath, PRISMA_HIDE_UPDATE_MESSAGE: '1' },
  });
}

/** Tests run against a real PostgreSQL server: install Debian's package when there is none. */
function ensurePostgresServer() {
  if (process.env.TEST_DATABASE_URL) return;
  const base = '/usr/lib/postgresql';
  const have = existsSync(base) && spawnSync('sh', ['-c', `ls ${base}/*/bin/postgres`], { stdio: 'ignore' }).status === 0;
  if (have) return;
  say('installing PostgreSQL server (Debian package) for the test suite...');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const aptGet = (...args) => (process.getuid?.() === 0 ? run('apt-get', args, { env }) : run('sudo', ['apt-get', ...args], { env }));
  aptGet('update', '-qq');
  aptGet('install', '-y', '-qq', '--no-install-recommends', 'postgresql');
}

const command = process.argv[2];
ensureDependencies();
ensurePrismaClient(command === 'generate');
if (command === 'start') {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'infra', 'start.ts')], { cwd: root, stdio: 'inherit' });
  // Forward stop signals so the platform shuts down gracefully whichever process receives them.
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
} else if (command === 'test') {
  ensurePostgresServer();
  const r = spawnSync(path.join(root, 'node_modules', '.bin', 'vitest'), ['run', ...process.argv.slice(3)], { cwd: root, stdio: 'inherit' });
  process.exit(r.status ?? 1);
} else if (command !== 'generate') {
  say('usage: bootstrap.mjs start|test|generate');
  process.exit(2);
}
