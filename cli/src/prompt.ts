import { confirm, isCancel, password, select, text } from '@clack/prompts';
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

/**
 * Asks which of several answers the user means (an environment a name is in); without a terminal
 * it throws `refusal`, which says how to name it on the command line.
 */
export async function chooseOrStop(question: string, choices: string[], refusal: CliError): Promise<string> {
  if (!canPrompt()) throw refusal;
  return answered(
    await select({ message: question, options: choices.map((c) => ({ value: c, label: c })), output: process.stderr }),
  );
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
