/**
 * Where the CLI gets its key (docs/apps.md): SERVICE_API_KEY, the project's .env, the
 * stored login. `gantry login` checks a key with GET /v2/apps before storing it; a tiny stand-in
 * for that one call (200 for one key, 401 for any other) is enough to test it here.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gantry, tempDir } from '../support/cli.ts';

const GOOD_KEY = 'good-key-0123456789';

describe('authentication', () => {
  const root = tempDir();
  let server: Server;
  let apiUrl: string;
  /** The bearer tokens the stand-in saw, in order. */
  const seen: string[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      const token = (req.headers.authorization ?? '').replace(/^Bearer /, '');
      seen.push(token);
      if (req.method === 'GET' && req.url === '/v2/apps' && token === GOOD_KEY) {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ apps: [] }));
        return;
      }
      res
        .writeHead(401, { 'content-type': 'application/problem+json' })
        .end(JSON.stringify({ title: 'Unauthorized', status: 401, detail: 'invalid API key' }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('deploy without any key says how to set one', async () => {
    const dir = path.join(root, 'nokey');
    const home = path.join(root, 'home-nokey');
    mkdirSync(dir, { recursive: true });
    const r = await gantry(['deploy'], { cwd: dir, home });
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain('SERVICE_API_KEY');
    expect(r.stderr).toContain('.env');
    expect(r.stderr).toContain('gantry login');
    // With --json, the same refusal is the one event on stderr, as JSON.
    const json = await gantry(['deploy', '--json'], { cwd: dir, home });
    expect(json.code).toBe(1);
    expect(json.stdout).toBe('');
    const lines = json.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ type: 'error', message: expect.stringContaining('SERVICE_API_KEY') });
  });

  it('login stores a key the platform accepts, readable by the user only', async () => {
    const home = path.join(root, 'home-login');
    const r = await gantry(['login', '--api-url', apiUrl, '--api-key', GOOD_KEY], { cwd: root, home });
    expect(r.code, r.stderr).toBe(0);
    const dir = path.join(home, '.config', 'gantry');
    const file = path.join(dir, 'credentials.json');
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ apiUrl, apiKey: GOOD_KEY });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);

    // The stored login is then the key and the address of commands that need them.
    const before = seen.length;
    const list = await gantry(['app', 'list', '--json'], { cwd: root, home });
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toEqual({ apps: [] });
    expect(seen.slice(before)).toEqual([GOOD_KEY]);

    const out = await gantry(['logout'], { cwd: root, home });
    expect(out.code).toBe(0);
    expect(existsSync(file)).toBe(false);
  });

  it('login with a refused key says so and stores nothing', async () => {
    const home = path.join(root, 'home-refused');
    const r = await gantry(['login', '--api-url', apiUrl, '--api-key', 'wrong-key'], { cwd: root, home });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/the key was refused/i);
    expect(existsSync(path.join(home, '.config', 'gantry', 'credentials.json'))).toBe(false);
  });

  it('login without a key and without a terminal asks for --api-key', async () => {
    const r = await gantry(['login', '--api-url', apiUrl], { cwd: root, home: path.join(root, 'home-tty') });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('--api-key');
  });

  it('SERVICE_API_KEY comes before the project .env, which comes before the stored login', async () => {
    const home = path.join(root, 'home-order');
    expect((await gantry(['login', '--api-url', apiUrl, '--api-key', GOOD_KEY], { cwd: root, home })).code).toBe(0);
    const dir = path.join(root, 'order');
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, '.env'), `SERVICE_API_KEY=from-dotenv\nGANTRY_API_URL=${apiUrl}\n`);

    let before = seen.length;
    const fromDotEnv = await gantry(['app', 'list'], { cwd: dir, home });
    expect(seen.slice(before)).toEqual(['from-dotenv']);
    // Refused: the platform's problem detail, in one message.
    expect(fromDotEnv.code).toBe(1);
    expect(fromDotEnv.stderr).toContain('invalid API key');
    expect(fromDotEnv.stderr).toContain('401');

    before = seen.length;
    await gantry(['app', 'list'], { cwd: dir, home, env: { SERVICE_API_KEY: 'from-environment' } });
    expect(seen.slice(before)).toEqual(['from-environment']);
  });
});
