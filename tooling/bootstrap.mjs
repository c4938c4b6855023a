#!/usr/bin/env node
// The two README commands. Plain JavaScript with no dependencies, because it runs before `npm ci`:
//   npm start -> install what is missing, generate the Prisma client, run infra/start.ts
//   npm test  -> the same, plus a PostgreSQL server, Chromium and jq for the suite, then vitest
// and `npm run prisma:generate` -> regenerate the Prisma client now (after editing the schema).
// All of it runs on a supported Node.js (tooling/node-runtime.mjs): where the machine's node is older,
// the first run fetches Node 22 from the npm registry once, and everything below runs on that.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chooseNode, ensureNode, SUPPORTED_NODE } from './node-runtime.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const mtime = (p) => (existsSync(p) ? statSync(p).mtimeMs : 0);
const say = (msg) => console.error(`[gantry] ${msg}`);

/**
 * The node that npm, the Prisma CLI, vitest, Gantry and every child `node` run on: this one when it
 * is supported, else the pinned Node 22 (fetched once per machine), with its bin directory first on
 * PATH. This process itself stays on the machine's node and only starts those children: Node 20 has
 * no execve, so running itself again would put one more process between npm and Gantry, one more
 * relay for stop signals (see `start` below).
 */
function resolveRuntime() {
  const choice = chooseNode({ version: process.version, platform: process.platform, arch: process.arch });
  if (choice.use === 'current') return { node: process.execPath, env: process.env };
  if (choice.use === 'unsupported') {
    say(choice.reason);
    process.exit(1);
  }
  let fetched;
  try {
    fetched = ensureNode(choice, { log: say });
  } catch (err) {
    say(`could not fetch Node.js ${choice.version}: ${err instanceof Error ? err.message : String(err)}`);
    say(`install Node.js 22 or 24 (${SUPPORTED_NODE}) and run this again.`);
    process.exit(1);
  }
  say(
    `Node.js ${process.version} is older than Gantry supports (${SUPPORTED_NODE}); running on Node.js v${choice.version} (${fetched.binDir}).`,
  );
  const env = {
    ...process.env,
    PATH: `${fetched.binDir}${path.delimiter}${process.env.PATH ?? ''}`,
    // npm hands scripts the node it runs on under these names; children must see the one they run on.
    NODE: fetched.node,
    npm_node_execpath: fetched.node,
  };
  return { node: fetched.node, env };
}

const runtime = resolveRuntime();

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', env: runtime.env, ...opts });
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
  // The npm that runs this script (npm_execpath), on the chosen node; else the one on PATH, whose
  // `#!/usr/bin/env node` finds the chosen node first.
  const npmCli = process.env.npm_execpath;
  if (npmCli && /npm-cli\.js$/.test(npmCli)) run(runtime.node, [npmCli, 'install', '--no-audit', '--no-fund']);
  else run('npm', ['install', '--no-audit', '--no-fund']);
}

/** The Prisma client is generated code (not committed); regenerate when the schema is newer. */
function ensurePrismaClient(force = false) {
  const generated = path.join(root, 'generated', 'prisma', 'client.ts');
  if (!force && mtime(generated) >= mtime(path.join(root, 'prisma', 'schema.prisma'))) return;
  say('generating the Prisma client...');
  // `prisma generate` needs no schema engine, but the CLI wants one configured; any executable will do.
  run(runtime.node, [path.join(root, 'node_modules', '.bin', 'prisma'), 'generate'], {
    env: {
      ...runtime.env,
      PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? runtime.node,
      PRISMA_HIDE_UPDATE_MESSAGE: '1',
    },
  });
}

/** Tests run against a real PostgreSQL server: install Debian's package when there is none. */
function ensurePostgresServer() {
  if (process.env.TEST_DATABASE_URL) return;
  const base = '/usr/lib/postgresql';
  const have =
    existsSync(base) && spawnSync('sh', ['-c', `ls ${base}/*/bin/postgres`], { stdio: 'ignore' }).status === 0;
  if (have) return;
  aptInstall(['postgresql'], 'PostgreSQL server (Debian package) for the test suite');
}

/** The browser test of the GraphQL explorer drives Debian's Chromium (playwright-core, no download). */
function ensureChromium() {
  if (process.env.CHROMIUM_PATH || existsSync('/usr/bin/chromium')) return;
  aptInstall(['chromium'], "Chromium (Debian package) for the suite's browser test");
}

/** The README tour's test runs the README's curl lines as written, and one pipes into jq. */
function ensureJq() {
  if (spawnSync('sh', ['-c', 'command -v jq'], { stdio: 'ignore' }).status === 0) return;
  aptInstall(['jq'], "jq (Debian package) for the README tour's test");
}

let aptUpdated = false;
function aptInstall(packages, what) {
  say(`installing ${what}...`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const aptGet = (...args) =>
    process.getuid?.() === 0 ? run('apt-get', args, { env }) : run('sudo', ['apt-get', ...args], { env });
  if (!aptUpdated) aptGet('update', '-qq');
  aptUpdated = true;
  aptGet('install', '-y', '-qq', '--no-install-recommends', ...packages);
}

/**
 * The Temporal CLI is found or built (once per machine, minutes) here in the foreground, where a
 * Ctrl+C stops the build, not inside Gantry's own process group (below). Skipped when it cannot be
 * needed or is already built.
 */
function ensureTemporalCli() {
  const cacheHome = process.env.XDG_CACHE_HOME ?? path.join(homedir(), '.cache');
  if (
    process.env.TEMPORAL_ADDRESS ||
    process.env.TEMPORAL_CLI_PATH ||
    existsSync(path.join(cacheHome, 'gantry', 'bin', 'temporal'))
  )
    return;
  run(runtime.node, ['--import', 'tsx', path.join(root, 'tooling', 'ensure-temporal-cli.ts')]);
}

/** Stop signals that arrive within this long of one passed on are the same stop (see below). */
const SAME_STOP_MS = 500;

/**
 * Runs infra/start.ts in a process group of its own, so that a terminal's Ctrl+C (SIGINT to the
 * whole foreground group) reaches Gantry only through this process, and reaches it once: npm passes
 * the terminal's SIGINT on to its script as well, so this process gets two for one key press. A
 * stop signal within SAME_STOP_MS of one passed on is that same stop; a later one (a second Ctrl+C)
 * is passed on too, and Gantry then exits at once. The embedded PostgreSQL and Temporal dev server
 * are Gantry's children, in its group, so the terminal's signal does not stop them before Gantry
 * has drained: Gantry stops them last. An IPC channel tells Gantry when this process is gone
 * (killed, or its terminal closed): it then stops gracefully by itself.
 */
function startPlatform() {
  const child = spawn(runtime.node, ['--import', 'tsx', path.join(root, 'infra', 'start.ts')], {
    cwd: root,
    env: runtime.env,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    detached: true,
  });
  let passedOn = -Infinity;
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(signal, () => {
      const now = Date.now();
      if (now - passedOn < SAME_STOP_MS) return;
      passedOn = now;
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    });
  }
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}

const command = process.argv[2];
if (command === 'node') {
  // `bootstrap.mjs node --version`: the node the commands run on (.ci/run prints it).
  const r = spawnSync(runtime.node, process.argv.slice(3), { stdio: 'inherit', env: runtime.env });
  process.exit(r.status ?? 1);
}
ensureDependencies();
ensurePrismaClient(command === 'generate');
if (command === 'start') {
  ensureTemporalCli();
  startPlatform();
} else if (command === 'test') {
  ensurePostgresServer();
  ensureChromium();
  ensureJq();
  say(
    `running the suite on Node.js ${spawnSync(runtime.node, ['--version'], { encoding: 'utf8' }).stdout.trim()} (${runtime.node})`,
  );
  const r = spawnSync(
    runtime.node,
    [path.join(root, 'node_modules', '.bin', 'vitest'), 'run', ...process.argv.slice(3)],
    { cwd: root, stdio: 'inherit', env: runtime.env },
  );
  process.exit(r.status ?? 1);
} else if (command === 'test-unit') {
  // The unit layer needs no servers, browser or packages beyond npm's: vitest's `unit` project.
  const r = spawnSync(
    runtime.node,
    [path.join(root, 'node_modules', '.bin', 'vitest'), 'run', '--project', 'unit', ...process.argv.slice(3)],
    { cwd: root, stdio: 'inherit', env: runtime.env },
  );
  process.exit(r.status ?? 1);
} else if (command !== 'generate') {
  say('usage: bootstrap.mjs start|test|test-unit|generate|node [args]');
  process.exit(2);
}
