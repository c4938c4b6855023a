import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Command } from 'commander';
import { readCredentials } from '../config.ts';
import { CliError } from '../errors.ts';
import { say } from '../output.ts';
import { normaliseName, NAME_RULE } from '../project.ts';
import { CLI_ROOT, sdkRoot } from '../python.ts';

/**
 * Template file -> the name it gets in the project. Dot files are stored without their dot: npm
 * leaves some of them out of a package, and they would hide in a listing of templates/ anyway.
 */
const TEMPLATES: Array<[string, string]> = [
  ['lb_worker.py', 'lb_worker.py'],
  ['gpu_worker.py', 'gpu_worker.py'],
  ['cpu_worker.py', 'cpu_worker.py'],
  ['env.example', '.env.example'],
  ['gantryignore', '.gantryignore'],
  ['gantry.toml', 'gantry.toml'],
  ['requirements.txt', 'requirements.txt'],
  ['README.md', 'README.md'],
];

export function registerInit(program: Command): void {
  program
    .command('init')
    .description(
      'create a project: three example workers, requirements, settings and a readme (nothing on the platform)',
    )
    .argument('<project>', "directory to create, or '.' for the current one")
    .option('-f, --force', 'overwrite files that already exist')
    .action((project: string, opts: { force?: boolean }) => {
      initProject(project, Boolean(opts.force));
    });
}

function initProject(project: string, force: boolean): void {
  const dir = path.resolve(project);
  if (existsSync(dir) && !statSync(dir).isDirectory()) throw new CliError(`${project} exists and is not a directory.`);
  const name = normaliseName(path.basename(dir));
  if (!name)
    throw new CliError(
      `Cannot make a project name out of '${path.basename(dir)}' (${NAME_RULE}); choose another directory name.`,
    );

  const existing = TEMPLATES.map(([, target]) => target).filter((t) => existsSync(path.join(dir, t)));
  if (existing.length > 0 && !force) {
    throw new CliError(
      `Not overwriting ${existing.join(', ')} in ${dir}; pass --force to replace ${existing.length === 1 ? 'it' : 'them'}.`,
    );
  }

  const values: Record<string, string> = {
    PROJECT_NAME: name,
    // pip takes a file URL to a local project folder: `gantry-sdk @ file:///…/sdk/python`.
    SDK_URL: pathToFileURL(sdkRoot()).href,
  };
  mkdirSync(dir, { recursive: true });
  for (const [template, target] of TEMPLATES) {
    const text = readFileSync(path.join(CLI_ROOT, 'templates', template), 'utf8').replace(
      /\{\{(\w+)\}\}/g,
      (all, key: string) => values[key] ?? all,
    );
    writeFileSync(path.join(dir, target), text);
  }

  const where = path.relative(process.cwd(), dir) || '.';
  say(`Created the project ${name} in ${dir}:`);
  for (const [, target] of TEMPLATES) say(`  ${target}${existing.includes(target) ? ' (replaced)' : ''}`);
  say('');
  say('Next:');
  if (where !== '.') say(`  cd ${where}`);
  say('  python3 -m venv .venv && .venv/bin/pip install -r requirements.txt   # the decorators, locally');
  // After `gantry login` the key is there already: no file to fill in.
  if (!readCredentials()) say('  cp .env.example .env   # set SERVICE_API_KEY (or run `gantry login`)');
  say('  gantry deploy   # gpu_worker.py needs a host with its GPU: remove it to deploy the rest');
}
