import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { CliError, describeError } from './errors.ts';

export const DEFAULT_API_URL = 'http://127.0.0.1:8080';

/** What `gantry login` stores. */
export interface Credentials {
  apiUrl: string;
  apiKey: string;
}

/** `$XDG_CONFIG_HOME/gantry`, else `~/.config/gantry`. */
export function configDir(): string {
  const base = process.env.XDG_CONFIG_HOME || path.join(homedir(), '.config');
  return path.join(base, 'gantry');
}

export const credentialsPath = (): string => path.join(configDir(), 'credentials.json');

export function readCredentials(): Credentials | undefined {
  const file = credentialsPath();
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  try {
    const data = JSON.parse(text) as Partial<Credentials>;
    if (typeof data.apiKey !== 'string' || typeof data.apiUrl !== 'string') throw new Error('apiKey or apiUrl missing');
    return { apiUrl: data.apiUrl, apiKey: data.apiKey };
  } catch (err) {
    throw new CliError(
      `The stored login in ${file} is not readable (${describeError(err)}); run \`gantry login\` again.`,
    );
  }
}

/** The key is a secret: the folder is the user's alone (0700) and so is the file (0600), from its first byte. */
export function writeCredentials(c: Credentials): string {
  const dir = configDir();
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const file = credentialsPath();
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(c, null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, file);
  return file;
}

/** True when there was a stored login to remove. */
export function removeCredentials(): boolean {
  const file = credentialsPath();
  if (!existsSync(file)) return false;
  rmSync(file, { force: true });
  return true;
}

/**
 * The project's `.env`: values for the CLI only (docs/apps.md). Never copied into an
 * artifact (the build leaves `.env` out whatever the ignore file says).
 */
export function readDotEnv(projectDir: string): Record<string, string> {
  const file = path.join(projectDir, '.env');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return {};
  }
  return parseEnv(text) as Record<string, string>;
}

export interface Auth {
  apiUrl: string;
  apiKey: string;
  /** Where the key came from: the shell's SERVICE_API_KEY, the project's .env, or `gantry login`. */
  keyFrom: 'environment' | 'dotenv' | 'login';
}

/** The platform's address alone (login needs it before there is a key). */
export function resolveApiUrl(projectDir: string): string {
  const dotEnv = readDotEnv(projectDir);
  return process.env.GANTRY_API_URL || dotEnv.GANTRY_API_URL || readCredentials()?.apiUrl || DEFAULT_API_URL;
}

/**
 * Key: SERVICE_API_KEY in the environment, then in the project's `.env`, then the stored login.
 * Address: GANTRY_API_URL (environment, then `.env`), then the stored login's, then the local default.
 */
export function resolveAuth(projectDir: string): Auth {
  const dotEnv = readDotEnv(projectDir);
  const stored = readCredentials();
  const keyFrom = process.env.SERVICE_API_KEY ? 'environment' : dotEnv.SERVICE_API_KEY ? 'dotenv' : 'login';
  const apiKey = process.env.SERVICE_API_KEY || dotEnv.SERVICE_API_KEY || stored?.apiKey;
  if (!apiKey) {
    throw new CliError(
      "No API key: set SERVICE_API_KEY in your shell or in the project's .env file, or run `gantry login`.",
    );
  }
  const apiUrl = process.env.GANTRY_API_URL || dotEnv.GANTRY_API_URL || stored?.apiUrl || DEFAULT_API_URL;
  return { apiUrl, apiKey, keyFrom };
}
