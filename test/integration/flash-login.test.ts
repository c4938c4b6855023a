/**
 * `flash login`, the hosted deploy tool's sign-in, against Gantry: the real `flash login` (no key
 * set) prints the platform's /flash/login address, a user gives their key in that page in a real
 * browser (Debian's Chromium) and approves, and flash saves the key it then gets; `flash app list`
 * works with nothing but that saved key. Then what an unauthenticated caller could try: other
 * operations without a key, a request polled after its key was handed out, decisions by keys that
 * may not make them, a revoked approver, an expired request, and the per-address quota.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashKey } from '../../domain/accounts/index.ts';
import { isLocal, launchChromium } from '../support/browser.ts';
import { gantry } from '../support/cli.ts';
import { flashCli, flashEnv } from '../support/flash-cli.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import { ensurePythonClients, FLASH_CLIENT_REQUIREMENTS } from '../support/python-clients.ts';

let p: TestPlatform;
let python: string;
let browser: Browser | undefined;
/** A WRITE key of an ordinary account, and its account. */
let userKey: string;
let userAccount: string;
const root = mkdtempSync(path.join(tmpdir(), 'flash-login-'));
const home = path.join(root, 'home');

beforeAll(async () => {
  [python, p, browser] = await Promise.all([
    ensurePythonClients({ requirements: FLASH_CLIENT_REQUIREMENTS }),
    startTestPlatform(),
    launchChromium(),
  ]);
  mkdirSync(home);
  const account = await call(p.url, 'POST', '/v2/accounts', {
    key: p.adminKey,
    body: { email: 'flash-user@example.test', name: 'Flash user' },
  });
  userAccount = account.body.id;
  const key = await call(p.url, 'POST', '/v2/keys', {
    key: p.adminKey,
    body: { name: 'user', scopes: ['READ', 'WRITE', 'RUN'], accountId: userAccount },
  });
  userKey = key.body.key;
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await p?.stop();
});

/** A GraphQL call, with a key or without. */
const gql = (query: string, variables: Record<string, unknown> = {}, key?: string) =>
  call(p.url, 'POST', '/graphql', { key, body: { query, variables } });
const CREATE = 'mutation createFlashAuthRequest { createFlashAuthRequest { id status expiresAt } }';
const STATUS =
  'query flashAuthRequestStatus($flashAuthRequestId: String!) { flashAuthRequestStatus(flashAuthRequestId: $flashAuthRequestId) { id status expiresAt apiKey } }';
const decide = (field: 'approveFlashAuthRequest' | 'denyFlashAuthRequest', id: string, key: string) =>
  gql(`mutation ($id: String!) { ${field}(flashAuthRequestId: $id) { status } }`, { id }, key);

describe('flash login on Gantry', () => {
  it('signs flash in through the approval page, and flash works with the key it saved', async () => {
    const login = spawn(python, ['-m', 'runpod_flash.cli.main', 'login', '--no-open', '--timeout', '120'], {
      cwd: root,
      env: flashEnv({ home, url: p.url }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    login.stdout.setEncoding('utf8').on('data', (d: string) => (output += d));
    login.stderr.setEncoding('utf8').on('data', (d: string) => (output += d));
    const exited = new Promise<number | null>((resolve) => login.once('close', resolve));
    try {
      const address = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no login address in: ${output}`)), 60_000);
        const look = () => {
          const m = /(http:\/\/127\.0\.0\.1:\d+\/flash\/login\?request=[A-Za-z0-9_-]+)/.exec(output);
          if (m) {
            clearTimeout(timer);
            resolve(m[1]!);
          }
        };
        login.stdout.on('data', look);
        login.stderr.on('data', look);
      });

      const page = await browser!.newPage();
      await page.route('**/*', (route) => (isLocal(new URL(route.request().url())) ? route.continue() : route.abort()));
      await page.goto(address);
      // No key in this tab yet: the page asks for one.
      await page.locator('#key-input').fill(userKey);
      await page.locator('#key-form button[type=submit]').click();
      await expect.poll(() => page.locator('#login-status').textContent()).toBe('PENDING');
      expect(await page.locator('#login-ip').textContent()).toMatch(/127\.0\.0\.1/);
      await page.locator('#approve').click();
      await expect.poll(() => page.locator('#login-done').textContent()).toMatch(/^Approved/);
      await page.close();

      expect(await exited, output).toBe(0);
    } finally {
      login.kill();
    }
    expect(output).toContain('Logged in');
    // The key flash saved is a new key of the approver's account, with its scopes short of ADMIN.
    const saved = /api_key\s*=\s*"([^"]+)"/.exec(readFileSync(path.join(home, '.runpod', 'config.toml'), 'utf8'))?.[1];
    expect(saved).toMatch(/^gntr_/);
    const row = await p.ctx.db.apiKey.findUniqueOrThrow({ where: { hash: hashKey(saved!) } });
    expect([row.accountId, [...row.scopes].sort(), row.name]).toEqual([
      userAccount,
      ['READ', 'RUN', 'WRITE'],
      expect.stringMatching(/^flash login .* from 127\.0\.0\.1$/),
    ]);
    // flash with nothing but that saved key (no RUNPOD_API_KEY).
    const apps = await flashCli({ python, project: root, home, url: p.url }, ['app', 'list']);
    expect(apps.code, apps.output).toBe(0);
  }, 300_000);

  it('lets a request without a key run only the two login operations, and hands a key out once', async () => {
    // Anything else without a key: 401, as before.
    for (const query of [
      '{ myself { id } }',
      // Two fields, an alias, a second operation: not the one operation flash sends.
      'mutation { createFlashAuthRequest { id } createFlashApp(input: { name: "x" }) { id } }',
      'mutation { a: createFlashAuthRequest { id } }',
      `${CREATE} query q { myself { id } }`,
      '{ flashAuthRequest(flashAuthRequestId: "x") { id } }',
    ]) {
      const r = await gql(query);
      expect([query, r.status, r.body.errors[0].extensions.code]).toEqual([query, 401, 'UNAUTHENTICATED']);
    }

    // A body larger than flash's documents is refused unread, whatever it asks for.
    const padded = await call(p.url, 'POST', '/graphql', {
      rawBody: JSON.stringify({ query: CREATE, variables: { pad: 'x'.repeat(5000) } }),
    });
    expect([padded.status, padded.body.errors[0].extensions.code]).toEqual([401, 'UNAUTHENTICATED']);

    const created = await gql(CREATE);
    expect(created.status).toBe(200);
    const id: string = created.body.data.createFlashAuthRequest.id;
    // Letters and digits only: never an option on a command line (gantry flash deny <id>).
    expect(id).toMatch(/^[A-Za-z0-9]{43}$/);
    // Only its hash is stored.
    expect(await p.ctx.db.flashLoginRequest.count({ where: { idHash: id } })).toBe(0);
    const pending = await gql(STATUS, { flashAuthRequestId: id });
    expect(pending.body.data.flashAuthRequestStatus).toMatchObject({ status: 'PENDING', apiKey: null });
    const unknown = await gql(STATUS, { flashAuthRequestId: 'A'.repeat(43) });
    expect(unknown.body.errors[0].extensions.code).toBe('NOT_FOUND');

    // Keys that may not decide: READ only, and one limited to endpoints.
    const readOnly = await call(p.url, 'POST', '/v2/keys', {
      key: userKey,
      body: { name: 'ro', scopes: ['READ'] },
    });
    expect((await decide('approveFlashAuthRequest', id, readOnly.body.key)).body.errors[0].extensions.code).toBe(
      'FORBIDDEN',
    );

    expect((await decide('approveFlashAuthRequest', id, userKey)).body.data.approveFlashAuthRequest.status).toBe(
      'APPROVED',
    );
    // A second decision is refused; the first poll gets the key, later ones do not.
    expect((await decide('denyFlashAuthRequest', id, userKey)).body.errors[0].extensions.code).toBe('CONFLICT');
    const [a, b] = await Promise.all([
      gql(STATUS, { flashAuthRequestId: id }),
      gql(STATUS, { flashAuthRequestId: id }),
    ]);
    const answers = [a.body.data.flashAuthRequestStatus, b.body.data.flashAuthRequestStatus];
    expect(answers.filter((s) => s.apiKey).length).toBe(1);
    expect(answers.map((s) => s.status).sort()).toEqual(['APPROVED', 'CONSUMED']);
    const later = await gql(STATUS, { flashAuthRequestId: id });
    expect(later.body.data.flashAuthRequestStatus).toMatchObject({ status: 'CONSUMED', apiKey: null });
  });

  it('withdraws an approval whose key was revoked, and refuses a denied or expired request', async () => {
    const approver = await call(p.url, 'POST', '/v2/keys', {
      key: userKey,
      body: { name: 'approver', scopes: ['READ', 'WRITE'] },
    });
    const id1: string = (await gql(CREATE)).body.data.createFlashAuthRequest.id;
    const approved1 = await decide('approveFlashAuthRequest', id1, approver.body.key);
    expect(approved1.body, JSON.stringify(approved1.body)).toEqual({
      data: { approveFlashAuthRequest: { status: 'APPROVED' } },
    });
    expect((await call(p.url, 'DELETE', `/v2/keys/${approver.body.id}`, { key: userKey })).status).toBe(204);
    expect((await gql(STATUS, { flashAuthRequestId: id1 })).body.data.flashAuthRequestStatus).toMatchObject({
      status: 'DENIED',
      apiKey: null,
    });

    // Decided with the gantry CLI: the address flash printed, or the id.
    const cli = (args: string[]) =>
      gantry(['flash', ...args], {
        cwd: root,
        home: path.join(root, 'cli-home'),
        env: { SERVICE_API_KEY: userKey, GANTRY_API_URL: p.url },
      });
    const id2: string = (await gql(CREATE)).body.data.createFlashAuthRequest.id;
    const denied = await cli(['deny', id2, '--yes']);
    expect([denied.code, denied.stdout.trim()], denied.stderr).toEqual([0, 'Denied: flash stops waiting.']);
    expect((await gql(STATUS, { flashAuthRequestId: id2 })).body.data.flashAuthRequestStatus.status).toBe('DENIED');
    const again = await cli(['approve', id2, '--yes']);
    expect([again.code, again.stderr.trim()]).toEqual([1, 'error: This flash login is denied already.']);
    const id4: string = (await gql(CREATE)).body.data.createFlashAuthRequest.id;
    const approved = await cli(['approve', `${p.url}/flash/login?request=${id4}`, '--yes']);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toMatch(/^Approved: flash gets its key at its next poll/);
    expect((await gql(STATUS, { flashAuthRequestId: id4 })).body.data.flashAuthRequestStatus.apiKey).toMatch(/^gntr_/);
    const bad = await cli(['approve', 'not-a-request', '--yes']);
    expect([bad.code, bad.stderr]).toEqual([
      1,
      expect.stringMatching(/^error: 'not-a-request' is not a flash login request/),
    ]);

    const id3: string = (await gql(CREATE)).body.data.createFlashAuthRequest.id;
    await p.ctx.db.flashLoginRequest.update({ where: { idHash: hashKey(id3) }, data: { expiresAt: new Date() } });
    expect((await gql(STATUS, { flashAuthRequestId: id3 })).body.data.flashAuthRequestStatus.status).toBe('EXPIRED');
    const late = await decide('approveFlashAuthRequest', id3, userKey);
    expect([late.body.errors[0].extensions.code, late.body.errors[0].message]).toEqual([
      'CONFLICT',
      'this flash login request is expired already',
    ]);
  });

  it('limits the requests an address may make without a key', async () => {
    // Some were made in this file already, in this minute or the last: the eleventh of a minute is refused.
    const codes: number[] = [];
    for (let i = 0; i < 11 && !codes.includes(429); i++) codes.push((await gql(CREATE)).status);
    expect(codes.at(-1)).toBe(429);
    expect(codes.filter((c) => c === 200).length).toBeLessThanOrEqual(10);
    const refused = await gql(CREATE);
    expect(refused.body.errors[0].extensions.code).toBe('RATE_LIMITED');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});
