import { afterAll, describe, expect, it } from 'vitest';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ENVIRONMENT_SCHEMA, loadConfig } from '../../infra/config.ts';
import { specProblems } from '../../contracts/workflows.ts';
import { createTestCa, issueTestCertificate } from '../support/test-certificates.ts';

describe('loadConfig', () => {
  it('has embedded defaults when nothing is set', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      role: 'all',
      port: 8080,
      host: '127.0.0.1',
      temporalAddress: undefined,
      databaseUrl: undefined,
      temporalUiPort: 8233,
      taskQueue: 'gantry',
    });
    expect(c.publicUrl).toBe('http://127.0.0.1:8080');
    expect(c.dataDir.endsWith('.gantry/data')).toBe(true);
  });

  it('takes a Temporal UI address for the console only as an http(s) URL', () => {
    expect(loadConfig({ TEMPORAL_UI_URL: 'https://temporal.example/' }).temporalUiUrl).toBe('https://temporal.example');
    expect(loadConfig({}).temporalUiUrl).toBeUndefined();
    expect(() => loadConfig({ TEMPORAL_UI_URL: 'javascript:alert(1)' })).toThrow(
      /TEMPORAL_UI_URL must be an http\(s\) address/,
    );
    expect(() => loadConfig({ TEMPORAL_UI_URL: 'http://x/"><script>' })).toThrow(/TEMPORAL_UI_URL/);
  });

  it('reads the documented variables', () => {
    const c = loadConfig({
      PORT: '9000',
      GANTRY_ROLE: 'api',
      TEMPORAL_ADDRESS: 'temporal:7233',
      DATABASE_URL: 'postgresql://x/y',
      GANTRY_PUBLIC_URL: 'https://gantry.example/',
    });
    expect(c).toMatchObject({
      port: 9000,
      role: 'api',
      temporalAddress: 'temporal:7233',
      databaseUrl: 'postgresql://x/y',
      publicUrl: 'https://gantry.example',
    });
  });

  it('refuses nonsense with a message naming the variable, every problem at once', () => {
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(/PORT/);
    expect(() => loadConfig({ GANTRY_ROLE: 'both' })).toThrow(/GANTRY_ROLE/);
    const all = (() => {
      try {
        loadConfig({
          GANTRY_RATE_LIMITS: 'week=3',
          GANTRY_ORCHESTRATION: '{"nope": 1}',
          GANTRY_WEBHOOK_ALLOW: '10.0.0.0/99',
          PORT: '70000',
        });
      } catch (err) {
        return String(err);
      }
      return '';
    })();
    for (const name of ['GANTRY_RATE_LIMITS', 'GANTRY_ORCHESTRATION', 'GANTRY_WEBHOOK_ALLOW', 'PORT'])
      expect(all).toContain(name);
  });

  it("parses every subsystem's settings once, into the settings the domain runs with", () => {
    const c = loadConfig({
      GANTRY_LB_DOMAIN: '.Lb.Example.',
      GANTRY_JOB_TAKE_HOLD_MS: '1500',
      GANTRY_MAX_QUEUED_JOBS: '7',
      GANTRY_ORCHESTRATION: '{"watchIntervalSec": 2}',
      GANTRY_LB_HEALTH: '{"intervalMs": 300}',
      GANTRY_JOB_RATE_LIMITS: 'minute=5',
      GANTRY_PREPULL_HOSTS: '0',
      NODE_ENV: 'development',
    });
    expect(c.settings).toMatchObject({
      lbDomain: 'lb.example',
      lbHealth: { intervalMs: 300, failuresToRemove: 2 },
      jobs: { takeHoldMs: 1500, maxQueuedPerEndpoint: 7, pingIntervalMs: 10_000, lostAfterMs: 30_000 },
      orchestration: { watchIntervalSec: 2, pingIntervalMs: 10_000 },
      limits: { jobs: { minute: 5 } },
      prepullHosts: 0,
      stackTraces: true,
    });
    expect(loadConfig({}).settings).toMatchObject({ stackTraces: false, prepullHosts: 2 });
  });

  it('gives workers one ping interval, which worker-loss detection uses too', () => {
    // Told through the orchestration settings: the job API detects losses by the same interval.
    expect(loadConfig({ GANTRY_ORCHESTRATION: '{"pingIntervalMs": 1000}' }).settings.jobs).toMatchObject({
      pingIntervalMs: 1000,
      lostAfterMs: 3000,
    });
    expect(loadConfig({ GANTRY_WORKER_PING_INTERVAL_MS: '2000' }).settings.orchestration.pingIntervalMs).toBe(2000);
    expect(() =>
      loadConfig({ GANTRY_WORKER_PING_INTERVAL_MS: '2000', GANTRY_ORCHESTRATION: '{"pingIntervalMs": 1000}' }),
    ).toThrow(/disagree/);
  });

  it('is the one list of variables: the table of docs/configuration.md names exactly these', () => {
    const page = readFileSync(
      path.join(path.dirname(fileURLToPath(import.meta.url)), '../../docs/configuration.md'),
      'utf8',
    );
    // The table: from its header row to the first blank line after it.
    const start = page.indexOf('| variable | default | meaning |');
    expect(start).toBeGreaterThanOrEqual(0);
    const end = page.indexOf('\n\n', start);
    const table = page.slice(start, end < 0 ? undefined : end);
    const documented = new Set(
      [...table.matchAll(/^\| ([^|]+) \|/gm)].flatMap((m) =>
        [...m[1]!.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((v) => v[1]!),
      ),
    );
    documented.delete('TEST_DATABASE_URL');
    documented.delete('TEST_TEMPORAL_ADDRESS');
    expect([...documented].sort()).toEqual(Object.keys(ENVIRONMENT_SCHEMA.properties).sort());
  });
});

describe('GANTRY_TLS_CERT and GANTRY_TLS_KEY', () => {
  const ca = createTestCa();
  const lb = issueTestCertificate(ca, 'lb', ['*.lb.example', 'lb.example']);
  const other = issueTestCertificate(ca, 'other', ['api.example']);
  afterAll(() => rmSync(ca.dir, { recursive: true, force: true }));
  const problemOf = (env: Record<string, string>): string => {
    try {
      loadConfig(env);
    } catch (err) {
      return (err as Error).message;
    }
    return '';
  };

  it('serves HTTPS with a pair that matches: the files are kept as absolute paths and the default public URL is https', () => {
    const c = loadConfig({ GANTRY_TLS_CERT: lb.certFile, GANTRY_TLS_KEY: lb.keyFile, GANTRY_LB_DOMAIN: 'lb.example' });
    expect(c.tls).toEqual({ certFile: lb.certFile, keyFile: lb.keyFile });
    expect(c.publicUrl).toBe('https://127.0.0.1:8080');
    // A public URL that is set stays as set; without the pair, plain HTTP.
    expect(
      loadConfig({ GANTRY_TLS_CERT: lb.certFile, GANTRY_TLS_KEY: lb.keyFile, GANTRY_PUBLIC_URL: 'https://api.example' })
        .publicUrl,
    ).toBe('https://api.example');
    expect(loadConfig({}).tls).toBeUndefined();
  });

  it('refuses a start with a message naming the variable at fault', () => {
    expect(problemOf({ GANTRY_TLS_CERT: lb.certFile })).toMatch(/GANTRY_TLS_CERT and GANTRY_TLS_KEY go together/);
    expect(problemOf({ GANTRY_TLS_KEY: lb.keyFile })).toMatch(/GANTRY_TLS_CERT and GANTRY_TLS_KEY go together/);
    expect(problemOf({ GANTRY_TLS_CERT: '/nonexistent/cert.pem', GANTRY_TLS_KEY: lb.keyFile })).toMatch(
      /^configuration: GANTRY_TLS_CERT: cannot read \/nonexistent\/cert\.pem \(ENOENT\)$/,
    );
    expect(problemOf({ GANTRY_TLS_CERT: lb.certFile, GANTRY_TLS_KEY: '/nonexistent/key.pem' })).toMatch(
      /GANTRY_TLS_KEY: cannot read \/nonexistent\/key\.pem/,
    );
    expect(problemOf({ GANTRY_TLS_CERT: lb.certFile, GANTRY_TLS_KEY: other.keyFile })).toMatch(
      /GANTRY_TLS_KEY: .*other\.key is not the key of the certificate in GANTRY_TLS_CERT/,
    );
    expect(problemOf({ GANTRY_TLS_CERT: lb.keyFile, GANTRY_TLS_KEY: lb.keyFile })).toMatch(
      /GANTRY_TLS_CERT: .* is not a PEM certificate/,
    );
    expect(problemOf({ GANTRY_TLS_CERT: lb.certFile, GANTRY_TLS_KEY: lb.certFile })).toMatch(
      /GANTRY_TLS_KEY: .* is not a PEM private key/,
    );
    // Clients of load-balancing endpoints ask for <endpointId>.<GANTRY_LB_DOMAIN>: the certificate must cover it.
    expect(
      problemOf({ GANTRY_TLS_CERT: other.certFile, GANTRY_TLS_KEY: other.keyFile, GANTRY_LB_DOMAIN: 'lb.example' }),
    ).toMatch(/GANTRY_TLS_CERT: .* does not cover \*\.lb\.example \(GANTRY_LB_DOMAIN\); it names DNS:api\.example/);
    expect(loadConfig({ GANTRY_TLS_CERT: other.certFile, GANTRY_TLS_KEY: other.keyFile }).tls).toBeDefined();
  });
});

describe('specProblems', () => {
  const ok = {
    endpointId: 'e',
    workersMin: 0,
    workersMax: 2,
    scalerType: 'QUEUE_DELAY' as const,
    scalerValue: 4,
    idleTimeout: 5,
    timeoutMs: 1000,
    releaseVersion: 1,
  };
  it('accepts a valid spec and names each broken rule', () => {
    expect(specProblems(ok)).toEqual([]);
    expect(specProblems({ ...ok, workersMin: 3 })).toEqual(['workers.min must not exceed workers.max']);
    expect(specProblems({ ...ok, scalerValue: 0.4, idleTimeout: -1 })).toEqual([
      'scaling.value must be >= 0.5',
      'scaling.idleTimeout must be an integer >= 0',
    ]);
  });
});
