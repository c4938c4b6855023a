import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import {
  ApiError,
  PlatformClient,
  type App,
  type AppEndpoint,
  type Deployment,
  type DeploymentResource,
} from '../../api.ts';
import type { BuildResult } from '../../artifact.ts';
import { addBuildOptions, buildSummary, runBuild, type BuildFlags } from '../build.ts';
import { resolveAuth, type Auth } from '../../config.ts';
import { CliError, describeError } from '../../errors.ts';
import { emitJsonEvents, event, formatBytes, note, printJson, progress, say } from '../../output.ts';
import { runPreview } from './preview.ts';
import { LIVE_ENVIRONMENT } from '../dev/state.ts';
import { checkEnvironmentName, resolveAppName } from '../../project.ts';
import { chooseOrStop } from '../../prompt.ts';

interface DeployFlags extends BuildFlags {
  env?: string;
  app?: string;
  preview?: boolean;
}

const DEFAULT_ENVIRONMENT = 'production';
const POLL_INTERVAL_MS = 1000;
/** Polls that may fail in a row (a restarting API, a dropped connection) before the command gives up. */
const POLL_FAILURES_TOLERATED = 10;

export function registerDeploy(program: Command): void {
  addBuildOptions(
    program
      .command('deploy')
      .description('build, upload and deploy the project: one endpoint per resource')
      .option('-e, --env <name>', 'target environment (picked when the app has exactly one; created when missing)')
      .option('-a, --app <name>', 'app name (default: gantry.toml project name, else the directory name)'),
  )
    .addHelpText(
      'after',
      '\nWith --json, stdout is the result as one JSON document and stderr a JSON line per event\n(steps, and each resource as its state changes: {"type": "resource", "resource", "state", ...}).',
    )
    .option('--preview', 'run the endpoints in local containers (Podman or Docker) instead, until Ctrl+C')
    .action(async (flags: DeployFlags) => {
      if (flags.preview) {
        // A preview has no platform, so no environment to deploy to.
        if (flags.env !== undefined)
          throw new CliError(
            '--env has no meaning with --preview: a preview runs on this machine, not in an environment.',
          );
        await runPreview(flags);
        return;
      }
      await deploy(flags);
    });
}

/** What deploy will do about the app and environment, decided before the build so a rule-3 refusal comes first. */
interface Plan {
  app: string;
  env: string;
  createApp: boolean;
  createEnv: boolean;
}

async function deploy(flags: DeployFlags): Promise<void> {
  if (flags.json) emitJsonEvents(true);
  const projectDir = process.cwd();
  const auth = resolveAuth(projectDir);
  const client = new PlatformClient(auth.apiUrl, auth.apiKey);
  const appName = resolveAppName(projectDir, flags.app);
  const envFlag = flags.env !== undefined ? checkEnvironmentName(flags.env) : undefined;

  const existing = await findApp(client, appName);
  let plan: Plan;
  try {
    plan = planTarget(appName, envFlag, existing);
  } catch (err) {
    if (!(err instanceof AmbiguousEnvironment)) throw err;
    const chosen = await chooseOrStop(`Deploy ${appName} to which environment?`, err.choices, err);
    plan = planTarget(appName, chosen, existing);
  }
  const started = performance.now();
  const built = await runBuild(flags);
  const builtAt = performance.now();

  const target = await applyPlan(client, plan);
  let step = progress(`Uploading ${formatBytes(built.size)} to ${target.app}`);
  const prepared = await client.prepareUpload(target.app, {
    sha256: built.sha256,
    size: built.size,
    manifest: built.manifest,
  });
  if (prepared.build.status !== 'READY') {
    await client.upload(prepared.upload, built.path);
    await client.finalizeUpload(target.app, prepared.build.id);
  }
  step.succeed(`Uploaded build ${prepared.build.id}`);
  const uploadedAt = performance.now();

  step = progress(`Deploying build ${prepared.build.id} to ${target.app}/${target.env}`);
  let deployment = await client.deploy(target.app, target.env, prepared.build.id);
  let failures = 0;
  const said = new Map<string, string>();
  const sayProgress = (d: Deployment): void => {
    for (const r of d.resources ?? []) {
      const line = resourceLine(r);
      if (said.get(r.resource) === line) continue;
      said.set(r.resource, line);
      if (flags.json) event('resource', { deployment: d.id, ...r });
      else step.log(line);
    }
  };
  while (deployment.status === 'RUNNING') {
    sayProgress(deployment);
    step.update(waitingOn(deployment, target));
    await sleep(POLL_INTERVAL_MS);
    try {
      deployment = await client.getDeployment(target.app, deployment.id);
      failures = 0;
    } catch (err) {
      if (err instanceof ApiError && err.status !== 429 && err.status < 500) throw err;
      if (++failures > POLL_FAILURES_TOLERATED) {
        throw new CliError(
          `Lost track of deployment ${deployment.id} (${describeError(err)}); it may still finish: see \`gantry env show ${target.env}\`.`,
        );
      }
    }
  }
  sayProgress(deployment);
  if (deployment.status === 'FAILED') {
    step.fail(`Deployment ${deployment.id} failed`);
    throw new CliError(
      `The deployment to ${target.app}/${target.env} failed: ${deployment.error ?? 'the platform gave no reason'}. ` +
        // The rule of a failed deploy (docs/apps.md, "Releases"): all of it or none of it.
        'Nothing of it stays: endpoints it created are removed, the others return to the previous build.',
    );
  }
  step.succeed(`Deployed build ${prepared.build.id} to ${target.app}/${target.env}`);
  // Where the time went, for scripts and bench/apps.ts: the release includes the CLI's 1 s polls.
  const timings = {
    buildMs: Math.round(builtAt - started),
    uploadMs: Math.round(uploadedAt - builtAt),
    releaseMs: Math.round(performance.now() - uploadedAt),
  };

  if (flags.json) {
    printJson({
      app: target.app,
      environment: target.env,
      build: buildSummary(built),
      buildId: prepared.build.id,
      deployment,
      timings,
    });
    return;
  }
  printSummary(deployment, built, auth.keyFrom);
}

async function findApp(client: PlatformClient, name: string): Promise<App | undefined> {
  try {
    return await client.getApp(name);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return undefined;
    throw err;
  }
}

/**
 * Deploy rules 1-3: a missing app is created with the target environment (`production` when none
 * is named); a missing named environment is created in the existing app; without --env, the app's
 * only environment is the target, and several are a question only the user can answer. `gantry
 * dev`'s own environment (`live`) never counts without --env: after `dev`, a plain `deploy` goes
 * where it would have gone before it.
 */
export function planTarget(app: string, envFlag: string | undefined, existing: App | undefined): Plan {
  if (!existing) return { app, env: envFlag ?? DEFAULT_ENVIRONMENT, createApp: true, createEnv: false };
  const all = existing.environments.map((e) => e.name);
  if (envFlag !== undefined)
    return { app: existing.name, env: envFlag, createApp: false, createEnv: !all.includes(envFlag) };
  const names = all.filter((n) => n !== LIVE_ENVIRONMENT);
  if (names.length === 1) return { app: existing.name, env: names[0]!, createApp: false, createEnv: false };
  if (names.length === 0) return { app: existing.name, env: DEFAULT_ENVIRONMENT, createApp: false, createEnv: true };
  throw new AmbiguousEnvironment(
    `The app ${existing.name} has ${names.length} environments (${names.join(', ')}); choose one with --env NAME.`,
    names,
  );
}

/** Several environments could be meant: a person is asked, a script is told to pass --env. */
export class AmbiguousEnvironment extends CliError {
  constructor(
    message: string,
    readonly choices: string[],
  ) {
    super(message);
  }
}

async function applyPlan(client: PlatformClient, plan: Plan): Promise<{ app: string; env: string }> {
  if (plan.createApp) {
    await client.createApp(plan.app, plan.env);
    note(`Created the app ${plan.app} with the environment ${plan.env}`);
  } else if (plan.createEnv) {
    await client.createEnvironment(plan.app, plan.env);
    note(`Created the environment ${plan.env} in the app ${plan.app}`);
  }
  return { app: plan.app, env: plan.env };
}

/** One line per resource, as it changes: `  cpu-worker: waiting for a host (no capacity: ...)`. */
export function resourceLine(r: DeploymentResource): string {
  const release = r.release !== null ? ` release ${r.release}` : '';
  const workers = r.workers.ready + r.workers.starting + r.workers.waiting;
  const what: Record<DeploymentResource['state'], string> = {
    pending: 'waiting for its release',
    waiting: 'waiting for a host',
    starting: 'starting',
    releasing: workers > 0 ? `releasing: ${r.workers.ready}/${workers} new workers ready` : 'released',
    ready: 'ready',
    failed: 'failed',
    unchanged: 'unchanged',
  };
  return `  ${r.resource}${release}: ${what[r.state]}${r.detail ? ` (${r.detail})` : ''}`;
}

function waitingOn(d: Deployment, target: { app: string; env: string }): string {
  const endpoints =
    d.endpoints.length > 0
      ? `; endpoints: ${d.endpoints.map((e) => e.name).join(', ')}`
      : '; waiting for the endpoints';
  return `Deploying to ${target.app}/${target.env}: ${d.status.toLowerCase()}${endpoints}`;
}

/** Deploy rule 6: load-balanced endpoints with their routes, queue-based ones with /run and /runsync. */
function printSummary(d: Deployment, built: BuildResult, keyFrom: Auth['keyFrom']): void {
  const lb = d.endpoints.filter((e) => e.kind === 'lb');
  const queue = d.endpoints.filter((e) => e.kind !== 'lb');
  const routesOf = (e: AppEndpoint): Array<{ method: string; path: string }> =>
    e.routes.length > 0 ? e.routes : (built.manifest.resources.find((r) => r.name === e.resource)?.routes ?? []);
  const base = (url: string): string => url.replace(/\/+$/, '');

  if (lb.length > 0) {
    say('Load-balanced endpoints:');
    for (const e of lb) {
      say(`  ${e.resource}  (endpoint ${e.name}, id ${e.id})`);
      say(`    base URL  ${base(e.url)}`);
      for (const r of routesOf(e)) say(`    ${r.method.padEnd(6)} ${base(e.url)}${r.path}`);
    }
  }
  if (queue.length > 0) {
    if (lb.length > 0) say('');
    say('Queue-based endpoints:');
    for (const e of queue) {
      say(`  ${e.resource}  (endpoint ${e.name}, id ${e.id})`);
      say(`    base URL  ${base(e.url)}`);
      say(`    POST   ${base(e.url)}/run`);
      say(`    POST   ${base(e.url)}/runsync`);
    }
  }
  if (d.endpoints.length === 0) say('The deployment succeeded but lists no endpoints.');
  say('');
  // The key this deploy used, named where the user keeps it.
  const key =
    keyFrom === 'login'
      ? 'the key `gantry login` stored (or any key of the account)'
      : keyFrom === 'dotenv'
        ? "SERVICE_API_KEY from the project's .env"
        : '$SERVICE_API_KEY';
  say(`Every endpoint takes an API key as a bearer token: -H "Authorization: Bearer <key>", ${key}.`);
}
