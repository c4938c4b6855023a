import type { Command } from 'commander';
import { ApiError, type Environment } from '../api.ts';
import { buildColumn, clientForProject } from './app.ts';
import { CliError } from '../errors.ts';
import { note, printJson, say, table } from '../output.ts';
import { checkEnvironmentName, resolveAppName } from '../project.ts';
import { confirmOrStop } from '../prompt.ts';
import { deployedEndpoints, endpointTable, getAppOrExplain } from './undeploy.ts';

const APP_OPTION = [
  '-a, --app <name>',
  'app name (default: gantry.toml project name, else the directory name)',
] as const;

export function registerEnv(program: Command): void {
  const env = program.command('env').description("manage an app's environments (each runs its own endpoints)");

  env
    .command('list')
    .description("list the app's environments")
    .option(...APP_OPTION)
    .option('--json', 'print JSON')
    .action(async (flags: { app?: string; json?: boolean }) => {
      const app = await getAppOrExplain(clientForProject(), resolveAppName(process.cwd(), flags.app));
      if (flags.json) return printJson({ app: app.name, environments: app.environments });
      if (app.environments.length === 0) return say(`The app ${app.name} has no environments yet.`);
      say(
        table(
          ['NAME', 'ID', 'BUILD', 'ENDPOINTS', 'CREATED'],
          app.environments.map((e) => [e.name, e.id, buildColumn(e), String(e.endpoints.length), e.createdAt]),
        ),
      );
    });

  env
    .command('create')
    .description('create an environment (in a new app when the app does not exist yet)')
    .argument('<name>', 'environment name')
    .option(...APP_OPTION)
    .option('--json', 'print JSON')
    .action(async (name: string, flags: { app?: string; json?: boolean }) => {
      const client = clientForProject();
      const appName = resolveAppName(process.cwd(), flags.app);
      const envName = checkEnvironmentName(name);
      let created: Environment | undefined;
      try {
        created = await client.createEnvironment(appName, envName);
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 404)) throw err;
        const app = await client.createApp(appName, envName);
        note(`Created the app ${app.name}`);
        created = app.environments.find((e) => e.name === envName);
      }
      if (flags.json) return printJson(created ?? { name: envName });
      say(`Created the environment ${envName} in the app ${appName}.`);
    });

  env
    .command('delete')
    .description('delete an environment and its endpoints')
    .argument('<name>', 'environment name or id')
    .option(...APP_OPTION)
    .option('-y, --yes', 'do not ask for confirmation')
    .action(async (name: string, flags: { app?: string; yes?: boolean }) => {
      const client = clientForProject();
      const app = await getAppOrExplain(client, resolveAppName(process.cwd(), flags.app));
      const target = app.environments.find((e) => e.name === name || e.id === name);
      if (!target)
        throw new CliError(
          `The app ${app.name} has no environment ${name} (it has: ${app.environments.map((e) => e.name).join(', ') || 'none'}).`,
        );
      await confirmOrStop(
        `Delete the environment ${app.name}/${target.name} and its ${target.endpoints.length} endpoint(s)?`,
        flags.yes,
      );
      await client.deleteEnvironment(app.id, target.id);
      say(`Deleted the environment ${target.name} of ${app.name}.`);
    });

  env
    .command('show')
    .description('show an environment: its build and endpoints')
    .argument('<name>', 'environment name or id')
    .option(...APP_OPTION)
    .option('--json', 'print JSON')
    .action(async (name: string, flags: { app?: string; json?: boolean }) => {
      const client = clientForProject();
      const app = await getAppOrExplain(client, resolveAppName(process.cwd(), flags.app));
      const target = app.environments.find((e) => e.name === name || e.id === name);
      if (!target)
        throw new CliError(
          `The app ${app.name} has no environment ${name} (it has: ${app.environments.map((e) => e.name).join(', ') || 'none'}).`,
        );
      if (flags.json) return printJson({ app: app.name, ...target });
      say(`environment  ${app.name}/${target.name}`);
      say(`id           ${target.id}`);
      say(`build        ${target.currentBuildId ?? '- (nothing deployed yet)'}`);
      if (target.deploying)
        say(
          `deploying    build ${target.deploying.buildId} since ${target.deploying.startedAt} (deployment ${target.deploying.deploymentId})`,
        );
      say(`created      ${target.createdAt}`);
      const endpoints = deployedEndpoints(app, target.name);
      if (endpoints.length === 0) return say('No endpoints.');
      say(endpointTable(endpoints));
      // Each worker's state, and why one waits (placement's reason: no host with room, or none ever).
      const rows: string[][] = [];
      for (const e of endpoints)
        for (const w of (await client.listWorkers(e.id)).workers)
          rows.push([e.resource, w.id, w.status, w.statusReason ?? '']);
      say('');
      say(
        rows.length > 0
          ? table(['RESOURCE', 'WORKER', 'STATUS', 'WHY'], rows)
          : 'No workers (they start with the first call).',
      );
    });
}
