import { InvalidArgumentError, type Command } from 'commander';
import { PlatformClient } from '../../api.ts';
import { resolveAuth } from '../../config.ts';
import { openApiDocument } from './docs.ts';
import { LiveEndpoints } from './live.ts';
import { sourceFiles } from './source.ts';
import { LIVE_ENVIRONMENT } from './state.ts';
import { watchProject, type Watcher } from './watch.ts';
import { CliError, describeError } from '../../errors.ts';
import { note, say } from '../../output.ts';
import { resolveAppName } from '../../project.ts';
import { confirmOrStop } from '../../prompt.ts';
import { interpreterVersion, lastMeaningfulLine, projectPython, runProgram, scannerPath } from '../../python.ts';
import type { Resource, ScanError } from '../../scan.ts';
import { watchWorkerProblems } from './worker-watch.ts';

interface DevFlags {
  host: string;
  port: number;
  reload?: boolean;
  autoProvision?: boolean;
  yes?: boolean;
  app?: string;
}

/** Spec "Limits": auto-provision asks first when it would create more than this many endpoints. */
export const CONFIRM_ABOVE = 5;

/** Files whose change can matter even when the scanner's --files does not list them (any more). */
const ALWAYS_RELEVANT = new Set(['.gantryignore', 'requirements.txt', 'gantry.toml']);

function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 65_535)
    throw new InvalidArgumentError('a port is a whole number from 1 to 65535.');
  return n;
}

function configure(command: Command): Command {
  return command
    .option('--host <host>', 'address to listen on', 'localhost')
    .option('-p, --port <port>', 'port to listen on (the next free one when it is in use)', parsePort, 8888)
    .option('--reload', 'serve code changes without a redeploy (the default)')
    .option('--no-reload', 'do not watch the files')
    .option('--auto-provision', 'create every live endpoint at start instead of on its first call')
    .option('-y, --yes', 'do not ask before creating more than 5 endpoints')
    .option('-a, --app <name>', 'app name (default: gantry.toml project name, else the directory name)')
    .action((flags: DevFlags) => dev(flags));
}

export function registerDev(program: Command): void {
  configure(
    program
      .command('dev')
      .description(
        'serve the functions locally, each call running on a live endpoint (live-<name>) that reloads on save',
      ),
  );
  // The spec's hidden alias: same command, not listed in --help.
  configure(program.command('run', { hidden: true }).description('alias of dev'));
}

/** The scanner's answer without turning errors into an exception: a reload reports them and goes on. */
async function scan(python: string, projectDir: string): Promise<{ resources: Resource[]; errors: ScanError[] }> {
  const r = await runProgram(python, [scannerPath(), projectDir]);
  if (r.code !== 0)
    throw new CliError(`The scanner failed (${python}, exit ${r.code}): ${lastMeaningfulLine(r.stderr)}.`);
  try {
    const answer = JSON.parse(r.stdout) as { resources?: Resource[]; errors?: ScanError[] };
    return { resources: answer.resources ?? [], errors: answer.errors ?? [] };
  } catch {
    throw new CliError(`The scanner printed something other than JSON (${python}): ${r.stdout.slice(0, 200)}.`);
  }
}

const where = (e: ScanError): string => `${e.file}:${e.line}`;

/** A scan's problems as one sentence naming file:line, or undefined when there are none. */
function scanProblem(result: { resources: Resource[]; errors: ScanError[] }): string | undefined {
  const [first, ...rest] = result.errors;
  if (first) return `${where(first)}: ${first.message}${rest.length > 0 ? ` (and ${rest.map(where).join(', ')})` : ''}`;
  if (result.resources.length === 0)
    return 'No resources found: decorate a function with @endpoint(name=...) or create an Endpoint(name=...)';
  return undefined;
}

async function dev(flags: DevFlags): Promise<void> {
  const projectDir = process.cwd();
  // Spec "Authentication" 6: dev requires the key; without one it stops here with how to set it.
  const auth = resolveAuth(projectDir);
  const app = resolveAppName(projectDir, flags.app);
  const python = projectPython(projectDir);

  const [first, interpreter] = await Promise.all([scan(python, projectDir), interpreterVersion(python)]);
  const problem = scanProblem(first);
  if (problem) throw new CliError(problem);
  let resources = first.resources;

  const client = new PlatformClient(auth.apiUrl, auth.apiKey);
  const live = await LiveEndpoints.open(
    { client, projectDir, app, python, interpreter, trace: Boolean(process.env.GANTRY_DEV_TRACE) },
    resources,
  );

  for (const name of live.outdated())
    note(
      `resource ${name} configuration changed since live-${name} was made: ${flags.autoProvision ? 'updating it now' : 'it is updated on its next call'}`,
    );
  const toProvision = flags.autoProvision ? resources.map((r) => r.name).filter((n) => !live.current(n)) : [];
  const toCreate = toProvision.filter((n) => !(n in live.state.resources));
  if (toCreate.length > CONFIRM_ABOVE) {
    note(
      `--auto-provision would create ${toCreate.length} live endpoints: ${toCreate.map((n) => `live-${n}`).join(', ')}`,
    );
    await confirmOrStop(`Create ${toCreate.length} live endpoints in ${app}/${LIVE_ENVIRONMENT}?`, flags.yes);
  }

  // Files edited while dev was not running reach the endpoints that exist, before any call is served.
  try {
    const up = await live.syncSource();
    if (up) note(`source uploaded as version ${up.version}, so every live endpoint runs the current files`);
  } catch (err) {
    note(`could not upload the source: ${describeError(err)}`);
  }

  let document = openApiDocument(app, resources);
  const { exposureWarning, startDevServer } = await import('./server.ts');
  const exposed = exposureWarning(flags.host);
  if (exposed) note(exposed);
  const server = await startDevServer({
    host: flags.host,
    port: flags.port,
    apiKey: auth.apiKey,
    live,
    resources: () => resources,
    document: () => document,
  });

  let watcher: Watcher | undefined;
  let stopWatchingWorkers = (): void => undefined;
  // Ctrl+C from the moment the port is taken: stop serving and watching; the live endpoints stay.
  const stopped = new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      watcher?.close();
      stopWatchingWorkers();
      void server.close().finally(() => {
        note('Stopped. The live endpoints stay until `gantry undeploy` removes them.');
        resolve();
      });
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });

  let files = new Set(await sourceFiles(python, projectDir));
  let reloading: Promise<void> = Promise.resolve();
  const pending = new Set<string>();

  /** One reload at a time; changes made meanwhile are taken together by the next. */
  const reload = async (): Promise<void> => {
    const changed = [...pending];
    pending.clear();
    // Both scanner runs at once: this is on the way from a save to the new code answering.
    const [listed, result] = await Promise.all([sourceFiles(python, projectDir), scan(python, projectDir)]);
    const now = new Set(listed);
    const relevant = changed.filter((f) => now.has(f) || files.has(f) || ALWAYS_RELEVANT.has(f));
    files = now;
    if (relevant.length === 0) return;
    const what = relevant.length === 1 ? relevant[0]! : `${relevant.length} files`;

    const broken = scanProblem(result);
    if (broken) {
      note(`${what} changed, but ${broken.replace(/^No /, 'no ')}: keeping the last good code`);
      return;
    }
    const before = new Map(resources.map((r) => [r.name, r]));
    const depsBefore = live.depsHash;
    resources = result.resources;
    live.setResources(resources);
    document = openApiDocument(app, resources);
    for (const r of resources)
      if (!before.has(r.name))
        note(
          `new resource ${r.name}: /${r.kind === 'queue' ? `${r.name}/runsync` : r.name} (its live endpoint is made on its first call)`,
        );
    for (const name of before.keys()) {
      if (resources.some((r) => r.name === name)) continue;
      note(
        `resource ${name} is no longer in the code${name in live.state.resources ? `; live-${name} stays until \`gantry undeploy live-${name}\`` : ''}`,
      );
    }

    // The files first: every live endpoint gets them within about a second, whatever else follows.
    const uploaded = await live.syncSource({ files: listed });
    if (uploaded) note(`${what} changed: source uploaded as version ${uploaded.version} (${uploaded.ms} ms)`);

    if (live.depsHash !== depsBefore) {
      const again = live.provisioned();
      note(
        `dependencies changed: rebuilding${again.length > 0 ? ` and updating ${again.map((n) => `live-${n}`).join(', ')}` : ''}`,
      );
      if (again.length > 0) await report(live.provisionAll(again, 'dependencies changed'));
      return;
    }
    for (const name of live.outdated()) await live.provision(name, `resource ${name} configuration changed`);
  };

  const schedule = (paths: Set<string>): void => {
    for (const p of paths) pending.add(p);
    reloading = reloading
      .then(() => (pending.size > 0 ? reload() : undefined))
      .catch((err: unknown) => note(`reload failed: ${describeError(err)}`));
  };

  if (flags.reload !== false)
    watcher = watchProject(projectDir, schedule, (err) => note(`watching the files stopped: ${describeError(err)}`));
  // Said last, once edits are watched: from this line on the server is fully there.
  say(
    `Gantry dev server listening on ${server.url} (app ${app}, environment ${LIVE_ENVIRONMENT}; explorer: ${server.url}/docs)`,
  );
  printRoutes(server.url, resources, live, Boolean(flags.autoProvision));
  if (watcher) note('Watching the project: saved changes reach the live endpoints without a redeploy.');
  stopWatchingWorkers = watchWorkerProblems(client, () =>
    Object.entries(live.state.resources).map(([resource, r]) => ({ resource, endpointId: r.endpointId })),
  );

  if (flags.autoProvision) {
    if (toProvision.length === 0) note(`All ${resources.length} live endpoints are up to date`);
    else void report(live.provisionAll(toProvision, 'auto-provision'), resources.length);
  }

  await stopped;
  // A build or a call still under way would keep the process alive: the command is over.
  process.exit(0);
}

async function report(outcome: ReturnType<LiveEndpoints['provisionAll']>, total?: number): Promise<void> {
  try {
    const r = await outcome;
    const parts = [
      `${r.created} created`,
      `${r.updated} updated`,
      ...(total !== undefined ? [`${total - r.created - r.updated - r.failed.length} reused`] : []),
    ];
    note(
      r.failed.length > 0
        ? `Live endpoints: ${parts.join(', ')}; failed: ${r.failed.join(', ')}`
        : `Live endpoints ready: ${parts.join(', ')}`,
    );
  } catch (err) {
    note(`Provisioning failed: ${describeError(err)}`);
  }
}

function printRoutes(url: string, resources: Resource[], live: LiveEndpoints, autoProvision: boolean): void {
  for (const r of resources) {
    const state = `live-${r.name} (${live.current(r.name) ? 'live' : autoProvision ? 'being made now' : 'made on the first call'})`;
    if (r.kind === 'queue') say(`  POST ${url}/${r.name}/runsync  -> ${state}`);
    else
      for (const route of r.routes ?? []) say(`  ${route.method.padEnd(6)} ${url}/${r.name}${route.path}  -> ${state}`);
  }
}
