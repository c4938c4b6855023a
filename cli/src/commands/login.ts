import type { Command } from 'commander';
import { ApiError, PlatformClient } from '../api.ts';
import { credentialsPath, removeCredentials, resolveApiUrl, writeCredentials } from '../config.ts';
import { CliError } from '../errors.ts';
import { progress, say } from '../output.ts';
import { askSecret, askText, canPrompt } from '../prompt.ts';

function checkApiUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new CliError(`'${raw}' is not a URL; give the platform's address, e.g. http://127.0.0.1:8080.`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CliError(`'${raw}' is not an http(s) URL.`);
  return raw.replace(/\/+$/, '');
}

export function registerLogin(program: Command): void {
  program
    .command('login')
    .description('store an API key (checked against the platform) for every project on this machine')
    .option(
      '--api-url <url>',
      'the platform address (default: GANTRY_API_URL, the stored login, or http://127.0.0.1:8080)',
    )
    .option('--api-key <key>', 'the API key (asked for when not given)')
    .action(async (flags: { apiUrl?: string; apiKey?: string }) => {
      const interactive = canPrompt();
      const suggested = resolveApiUrl(process.cwd());
      const apiUrl = checkApiUrl(
        flags.apiUrl ?? (interactive ? await askText('Platform address', suggested) : suggested),
      );
      let apiKey = flags.apiKey;
      if (!apiKey) {
        if (!interactive) throw new CliError('No API key given and no terminal to ask on: pass --api-key KEY.');
        apiKey = await askSecret('API key');
      }

      const step = progress(`Checking the key with ${apiUrl}`);
      try {
        await new PlatformClient(apiUrl, apiKey).listApps();
      } catch (err) {
        step.fail();
        if (err instanceof ApiError && err.status === 401)
          throw new CliError(`The key was refused by ${apiUrl} (401); nothing was stored.`);
        throw err;
      }
      step.succeed(`The key works with ${apiUrl}`);
      const file = writeCredentials({ apiUrl, apiKey });
      say(`Logged in to ${apiUrl}; the key is stored in ${file} (readable by you only).`);
    });

  program
    .command('logout')
    .description('remove the stored API key')
    .action(() => {
      if (removeCredentials()) say(`Removed the stored login (${credentialsPath()}).`);
      else say(`Not logged in (no ${credentialsPath()}).`);
    });
}
