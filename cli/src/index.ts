import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Command, CommanderError } from 'commander';
import { registerApp } from './commands/app.ts';
import { registerBuild } from './commands/build.ts';
import { registerDeploy } from './commands/deploy/deploy.ts';
import { registerDev } from './commands/dev/dev.ts';
import { registerEnv } from './commands/env.ts';
import { registerFlash } from './commands/flash.ts';
import { CliError } from './errors.ts';
import { registerInit } from './commands/init.ts';
import { registerLogin } from './commands/login.ts';
import { emittingJsonEvents, event, failActiveProgress } from './output.ts';
import { CLI_ROOT } from './python.ts';
import { registerUndeploy } from './commands/undeploy.ts';

const version = (JSON.parse(readFileSync(path.join(CLI_ROOT, 'package.json'), 'utf8')) as { version: string }).version;

/** Usage errors (unknown flag, missing argument, bad choice) exit 2, as most command-line tools do. */
const USAGE_EXIT = 2;

function program(): Command {
  const root = new Command('gantry')
    .description('Scaffold, build and deploy Python functions as Gantry endpoints.')
    .version(version, '-v, --version')
    // Set before the subcommands exist: they inherit it.
    .exitOverride((err: CommanderError) => {
      // Help and --version exit 0; every other commander exit is a usage error.
      process.exit(err.exitCode === 0 ? 0 : USAGE_EXIT);
    })
    .showSuggestionAfterError(true);
  registerInit(root);
  registerBuild(root);
  registerDeploy(root);
  registerDev(root);
  registerUndeploy(root);
  registerEnv(root);
  registerApp(root);
  registerLogin(root);
  registerFlash(root);
  return root;
}

try {
  await program().parseAsync(process.argv);
} catch (err) {
  failActiveProgress();
  // With --json, stderr is JSON lines to its end: the error is the last event.
  const report = (text: string): void => {
    if (emittingJsonEvents()) event('error', { message: text });
    else process.stderr.write(`error: ${text}\n`);
  };
  if (err instanceof CliError) {
    report(err.message);
    process.exitCode = err.exitCode;
  } else {
    // Not a message written for the user: a bug, so the stack helps whoever reports it.
    report(`unexpected failure: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exitCode = 1;
  }
}
