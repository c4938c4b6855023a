import { Type } from 'typebox';
import type { Account } from '../../generated/prisma/client.ts';
import type { DomainContext } from '../context.ts';
import { validationFailed } from '../errors.ts';
import { validate } from '../shared/validation.ts';
import { type Principal, requireAccountWide, requireScope } from './auth.ts';

/** Most keys an account keeps, and the most text: ample for people and CI runners. */
export const MAX_PUBLIC_KEYS = 32;
const MAX_PUBLIC_KEYS_TEXT = 16 * 1024;

/** An OpenSSH public key line: its type, base64 key material and an optional comment. */
const PUBLIC_KEY_LINE =
  /^(ssh-ed25519|ssh-rsa|ssh-dss|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,3}( [^\0\r\n]*)?$/;

export const UserSettingsInputSchema = Type.Object(
  {
    pubKey: Type.String({
      maxLength: MAX_PUBLIC_KEYS_TEXT,
      description: 'SSH public keys in OpenSSH form, one a line; empty removes them',
    }),
  },
  { additionalProperties: false },
);

/** What is wrong with `text` as the account's public keys (one OpenSSH key a line). */
export function publicKeysProblems(text: string): string[] {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  if (lines.length > MAX_PUBLIC_KEYS) return [`$.pubKey: ${lines.length} keys; at most ${MAX_PUBLIC_KEYS}`];
  return lines.flatMap((line, i) =>
    PUBLIC_KEY_LINE.test(line.trim())
      ? []
      : [`$.pubKey: line ${i + 1} is not an OpenSSH public key ('ssh-ed25519 AAAA... comment')`],
  );
}

/** The calling key's own account (GraphQL `myself`). */
export async function ownAccount(ctx: DomainContext, principal: Principal): Promise<Account> {
  requireScope(principal, 'READ');
  return ctx.db.account.findUniqueOrThrow({ where: { id: principal.accountId } });
}

/** The account's serverless discount while it lasts: a factor, with no expiry or one still ahead. */
export function liveServerlessDiscount(
  account: Pick<Account, 'serverlessDiscountFactor' | 'serverlessDiscountExpires'>,
  now = new Date(),
): number | null {
  const factor = account.serverlessDiscountFactor;
  const expires = account.serverlessDiscountExpires;
  return factor !== null && (!expires || expires > now) ? factor : null;
}

/** GraphQL `updateUserSettings`: the account's SSH public keys (pods' `PUBLIC_KEY`, activities/worker-start.ts). */
export async function updateUserSettings(ctx: DomainContext, principal: Principal, raw: unknown): Promise<Account> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const input = validate(UserSettingsInputSchema, raw);
  const problems = publicKeysProblems(input.pubKey);
  if (problems.length > 0) throw validationFailed(problems);
  const lines = input.pubKey
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  return ctx.db.account.update({
    where: { id: principal.accountId },
    data: { pubKey: lines.length > 0 ? lines.join('\n') : null },
  });
}
