/** Helpers shared by the REST management-resource tests (not a test file itself). */
import { expect } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { call, type TestPlatform } from './platform.ts';

/** A problem+json answer with this status. */
export const problemOf = (
  res: { status: number; headers: Headers; body: { title: string; status: number } },
  status: number,
): void => {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(res.body.status).toBe(status);
};

/**
 * What the tests use beside the platform admin: a second, ordinary account made through the API
 * with a READ+WRITE key, a READ key of the admin, and a host whose data center network volumes live in.
 */
export async function seedRestAccounts(
  p: TestPlatform,
): Promise<{ adminAccountId: string; other: { accountId: string; key: string }; readOnlyKey: string }> {
  const adminAccountId = (await p.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } })).id;
  const account = await call(p.url, 'POST', '/v2/accounts', {
    key: p.adminKey,
    body: { email: 'other@example.test', name: 'Other' },
  });
  expect(account.status).toBe(201);
  const key = await call(p.url, 'POST', '/v2/keys', {
    key: p.adminKey,
    body: { name: 'other rw', scopes: ['READ', 'WRITE'], accountId: account.body.id },
  });
  expect(key.status).toBe(201);
  const other = { accountId: account.body.id, key: key.body.key };
  const readOnlyKey = (await issueApiKey(p.ctx.db, adminAccountId, 'ro', ['READ'])).key;
  // Network volumes live in the data center of a registered host.
  await p.ctx.db.host.create({
    data: {
      id: newId(),
      name: 'ro-host',
      address: '10.0.0.9',
      user: 'gantry',
      dataCenterId: 'EU-RO-1',
      status: 'READY',
    },
  });
  return { adminAccountId, other, readOnlyKey };
}
