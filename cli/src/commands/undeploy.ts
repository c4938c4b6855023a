import type { Command } from 'commander';
import { ApiError, PlatformClient, type App, type AppEndpoint } from '../api.ts';
import { resolveAuth } from '../config.ts';
import { CliError } from '../errors.ts';
import { note, printJson, say, table } from '../output.ts';
import { resolveAppName } from '../project.ts';
import { chooseOrStop, confirmOrStop } from '../prompt.ts';

interface UndeployFlags {
  all?: boolean;
  yes?: boolean;
  app?: string;
  env?: string;
  json?: boolean;
}

export interface DeployedEndpoint extends AppEndpoint {
  environment: string;
}

export function registerUndeploy(program: Command): void {
  program
    .command('undeploy')
    .description(
      "list the app's endpoints (`undeploy list`), remove one by endpoint or resource name, or remove them all (--all)",
    )
    .argument('[target]', "'list', or the endpoint (or resource) name to remove")
    .option('--all', 'remove every endpoint of the app (of one environment with --env)')
    .option('-y, --yes', 'do not ask for confirmation')
    .option('-a, --app <name>', 'app name (default: gantry.toml project name, else the directory name)')
    .option('-e, --env <name>', 'only this environment')
    .option('--json', 'print the list as JSON')
    .action(async (target: string | undefined, flags: UndeployFlags) => {
      if (flags.all && target !== undefined) throw new CliError(`Give either an endpoint name or --all, not both.`, 2);
      if (!flags.all && target === undefined)
        throw new CliError(
          'Say what to undeploy: `gantry undeploy list`, `gantry undeploy NAME` or `gantry undeploy --all`.',
          2,
        );
      const projectDir = process.cwd();
      const auth = resolveAuth(projectDir);
      const client = new PlatformClient(auth.apiUrl, auth.apiKey);
      const appName = resolveAppName(projectDir, flags.app);
      const endpoints = deployedEndpoints(await getAppOrExplain(client, appName), flags.env);

      if (target === 'list') return listEndpoints(appName, endpoints, flags);
      if (flags.all) return removeAll(client, appName, endpoints, flags);
      return removeOne(client, appName, endpoints, target!, flags);
    });
}

/** The app, or a message that says which app was looked for and how to name another. */
export async function getAppOrExplain(client: PlatformClient, name: string): Promise<App> {
  try {
    return await client.getApp(name);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404)
      throw new CliError(`There is no app named ${name}; name one with --app (see \`gantry app list\`).`);
    throw err;
  }
}

export function deployedEndpoints(app: App, env: string | undefined): DeployedEndpoint[] {
  if (env !== undefined && !app.environments.some((e) => e.name === env)) {
    throw new CliError(
      `The app ${app.name} has no environment ${env} (it has: ${app.environments.map((e) => e.name).join(', ') || 'none'}).`,
    );
  }
  return app.environments
    .filter((e) => env === undefined || e.name === env)
    .flatMap((e) => e.endpoints.map((ep) => ({ ...ep, environment: e.name })));
}

export function endpointTable(endpoints: DeployedEndpoint[]): string {
  return table(
    ['ENVIRONMENT', 'RESOURCE', 'ENDPOINT', 'ID', 'KIND', 'URL'],
    endpoints.map((e) => [e.environment, e.resource, e.name, e.id, e.kind === 'lb' ? 'load-balanced' : 'queue', e.url]),
  );
}

function listEndpoints(app: string, endpoints: DeployedEndpoint[], flags: UndeployFlags): void {
  if (flags.json) return printJson({ app, endpoints });
  if (endpoints.length === 0)
    return say(`The app ${app} has no deployed endpoints${flags.env ? ` in ${flags.env}` : ''}.`);
  say(endpointTable(endpoints));
}

async function removeAll(
  client: PlatformClient,
  app: string,
  endpoints: DeployedEndpoint[],
  flags: UndeployFlags,
): Promise<void> {
  const where = flags.env ? `${app}/${flags.env}` : app;
  if (endpoints.length === 0) return say(`The app ${where} has no deployed endpoints; nothing to remove.`);
  note(endpointTable(endpoints));
  await confirmOrStop(
    `Remove these ${endpoints.length} endpoint${endpoints.length === 1 ? '' : 's'} of ${where}?`,
    flags.yes,
  );
  for (const e of endpoints) {
    await client.deleteEndpoint(e.id);
    say(`Removed ${e.name} (${e.resource} in ${e.environment})`);
  }
}

async function removeOne(
  client: PlatformClient,
  app: string,
  endpoints: DeployedEndpoint[],
  name: string,
  flags: UndeployFlags,
): Promise<void> {
  const byName = endpoints.filter((e) => e.name === name || e.id === name);
  const matches = byName.length > 0 ? byName : endpoints.filter((e) => e.resource === name);
  if (matches.length === 0) {
    const known = endpoints.map((e) => e.name).join(', ') || 'none';
    throw new CliError(
      `The app ${app} has no endpoint ${name}${flags.env ? ` in ${flags.env}` : ''} (deployed: ${known}).`,
    );
  }
  let e = matches[0]!;
  if (matches.length > 1) {
    const environments = matches.map((m) => m.environment);
    const chosen = await chooseOrStop(
      `Remove ${name} from which environment?`,
      environments,
      new CliError(
        `${name} is deployed in several environments (${environments.join(', ')}); choose one with --env NAME.`,
      ),
    );
    e = matches.find((m) => m.environment === chosen)!;
  }
  await client.deleteEndpoint(e.id);
  const again = e.environment === 'live' ? 'the next `gantry dev` call to it' : `the next deploy of ${e.environment}`;
  say(
    `Removed ${e.name} (${e.resource} in ${e.environment}); ${again} creates it again while the code still declares it.`,
  );
}
