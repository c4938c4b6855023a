import { confirm, isCancel, password, text } from '@clack/prompts';
import { CliError } from './errors.ts';

/** Prompts need a person: a terminal on both ends. Prompts draw on stderr so stdout stays the result. */
export const canPrompt = (): boolean => Boolean(process.stdin.isTTY && process.stderr.isTTY);

function answered<T>(value: T): Exclude<T, symbol> {
  if (isCancel(value)) throw new CliError('Cancelled.');
  return value as Exclude<T, symbol>;
}

/**
 * Asks before something that cannot be undone; `--yes` answers for scripts. Without a terminal
 * and without --yes it refuses rather than guessing.
 */
export async function confirmOrStop(question: string, yes: boolean | undefined): Promise<void> {
  if (yes) return;
  if (!canPrompt())
    throw new CliError(`${question.replace(/\?$/, '')}: there is no terminal to confirm on, so pass --yes.`);
  const ok = answered(await confirm({ message: question, initialValue: false, output: process.stderr }));
  if (!ok) throw new CliError('Nothing was changed.');
}

export async function askText(message: string, defaultValue: string): Promise<string> {
  const value = answered(await text({ message, placeholder: defaultValue, defaultValue, output: process.stderr }));
  return value.trim() || defaultValue;
}

export async function askSecret(message: string): Promise<string> {
  return answered(
    await password({
      message,
      output: process.stderr,
      validate: (v) => (v && v.trim() ? undefined : 'The key cannot be empty'),
    }),
  ).trim();
}
