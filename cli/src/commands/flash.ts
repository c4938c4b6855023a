import type { Command } from 'commander';
import { clientForProject } from './app.ts';
import { CliError } from '../errors.ts';
import { printJson, say } from '../output.ts';
import { confirmOrStop } from '../prompt.ts';

/** What `flash login` prints: `<console>/flash/login?request=<id>`, or the id alone. */
export function flashRequestId(given: string): string {
  let id = given.trim();
  if (id.includes('://')) {
    try {
      id = new URL(id).searchParams.get('request') ?? '';
    } catch {
      id = '';
    }
  }
  if (!/^[A-Za-z0-9]{43}$/.test(id))
    throw new CliError(
      `'${given}' is not a flash login request: give the address flash login printed (…/flash/login?request=…) or its request id.`,
    );
  return id;
}

interface FlashAuthRequest {
  status: string;
  createdAt: string;
  expiresAt: string;
  requesterIp: string;
}

const FIELDS = 'status createdAt expiresAt requesterIp';

/** `gantry flash approve|deny REQUEST`: decides a `flash login` of the hosted deploy tool with this login's key. */
export function registerFlash(program: Command): void {
  const flash = program.command('flash').description("sign in the hosted service's flash tool (flash login)");
  for (const approve of [true, false]) {
    flash
      .command(approve ? 'approve' : 'deny')
      .description(
        approve
          ? 'approve a flash login: flash gets a key of your account (read, write, run), no longer-lived than yours'
          : 'deny a flash login',
      )
      .argument('<request>', 'the address flash login printed, or its request id')
      .option('-y, --yes', 'do not ask first')
      .option('--json', 'print JSON')
      .action(async (request: string, flags: { yes?: boolean; json?: boolean }) => {
        const id = flashRequestId(request);
        const client = clientForProject();
        const { flashAuthRequest: seen } = await client.graphql<{ flashAuthRequest: FlashAuthRequest }>(
          `query ($id: String!) { flashAuthRequest(flashAuthRequestId: $id) { ${FIELDS} } }`,
          { id },
        );
        if (seen.status !== 'PENDING') throw new CliError(`This flash login is ${seen.status.toLowerCase()} already.`);
        await confirmOrStop(
          `${approve ? 'Approve' : 'Deny'} the flash login asked from ${seen.requesterIp} at ${seen.createdAt}?`,
          flags.yes,
        );
        const field = approve ? 'approveFlashAuthRequest' : 'denyFlashAuthRequest';
        const decided = (
          await client.graphql<Record<string, FlashAuthRequest>>(
            `mutation ($id: String!) { ${field}(flashAuthRequestId: $id) { ${FIELDS} } }`,
            { id },
          )
        )[field]!;
        if (flags.json) return printJson(decided);
        say(
          approve
            ? `Approved: flash gets its key at its next poll (the request was asked from ${decided.requesterIp}).`
            : 'Denied: flash stops waiting.',
        );
      });
  }
}
