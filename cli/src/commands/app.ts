import type { Command } from 'commander';
import { PlatformClient, type App, type Environment } from '../api.ts';
import { resolveAuth } from '../config.ts';
import { CliError } from '../errors.ts';
import { printJson, say, table } from '../output.ts';
import { checkEnvironmentName, isPlatformName, NAME_RULE } from '../project.ts';
import { confirmOrStop } from '../prompt.ts';
import { deployedEndpoints, endpointTable, getAppOrExplain } from './undeploy.ts';

export const clientForProject = (): PlatformClient => {
  const auth = resolveAuth(process.cwd());
  return new PlatformClient(auth.apiUrl, auth.apiKey);
};

function checkAppName(name: string): string {
  if (!isPlatformName(name)) throw new CliError(`'${name}' is not a valid app name (${NAME_RULE}).`);
  return name;
}

export function registerApp(program: Command): void {
  const app = program
    .command('app')
    .description('manage apps (a project deployed under one name, with its environments)');

  app
    .command('list')
    .description('list your apps and their environments')
    .option('--json', 'print JSON')
    .action(async (flags: { json?: boolean }) => {
      const { apps } = await clientForProject().listApps();
      if (flags.json) return printJson({ apps });
      if (apps.length === 0) return say('No apps yet: `gantry deploy` in a project creates one.');
      say(
        table(
          ['NAME', 'ID', 'ENVIRONMENTS', 'ENDPOINTS', 'CREATED'],
          apps.map((a) => [
            a.name,
            a.id,
            a.environments.map((e) => e.name).join(', ') || '-',
            String(a.environments.reduce((n, e) => n + e.endpoints.length, 0)),
            a.createdAt,
          ]),
        ),
      );
    });

  app
    .command('create')
    .description('create an app (deploy also creates it when missing)')
    .argument('<name>', 'app name')
    .option('-e, --env <name>', 'create its first environment too')
    .option('--json', 'print JSON')
    .action(async (name: string, flags: { env?: string; json?: boolean }) => {
      const created = await clientForProject().createApp(
        checkAppName(name),
        flags.env !== undefined ? checkEnvironmentName(flags.env) : undefined,
      );
      if (flags.json) return printJson(created);
      say(`Created the app ${created.name} (${created.id})${flags.env ? ` with the environment ${flags.env}` : ''}.`);
    });

  app
    .command('delete')
    .description('delete an app, its environments and all their endpoints')
    .argument('<name>', 'app name or id')
    .option('-y, --yes', 'do not ask for confirmation')
    .action(async (name: string, flags: { yes?: boolean }) => {
      const client = clientForProject();
      const found = await getAppOrExplain(client, name);
      const endpoints = deployedEndpoints(found, undefined).length;
      await confirmOrStop(
        `Delete the app ${found.name}, its ${found.environments.length} environment(s) and ${endpoints} endpoint(s)?`,
        flags.yes,
      );
      await client.deleteApp(found.id);
      say(`Deleted the app ${found.name}.`);
    });

  app
    .command('show')
    .description('show an app: its environments and endpoints')
    .argument('<name>', 'app name or id')
    .option('--json', 'print JSON')
    .action(async (name: string, flags: { json?: boolean }) => {
      const found = await getAppOrExplain(clientForProject(), name);
      if (flags.json) return printJson(found);
      printApp(found);
    });
}

/** An environment's build, and the one being deployed to it if a deployment is under way (older platforms leave `deploying` out). */
export function buildColumn(e: Pick<Environment, 'currentBuildId'> & { deploying?: Environment['deploying'] }): string {
  const current = e.currentBuildId ?? '-';
  return e.deploying ? `${current} (deploying ${e.deploying.buildId})` : current;
}

function printApp(a: App): void {
  say(`app       ${a.name}`);
  say(`id        ${a.id}`);
  say(`created   ${a.createdAt}`);
  if (a.environments.length === 0) return say('No environments yet.');
  say('environments');
  say(
    table(
      ['  NAME', 'BUILD', 'ENDPOINTS', 'CREATED'],
      a.environments.map((e) => [`  ${e.name}`, buildColumn(e), String(e.endpoints.length), e.createdAt]),
    ),
  );
  const endpoints = deployedEndpoints(a, undefined);
  if (endpoints.length > 0) {
    say('endpoints');
    say(endpointTable(endpoints));
  }
}
