import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../infra/config.ts';
import { specProblems } from '../../workflows/contracts.ts';

describe('loadConfig', () => {
  it('has embedded defaults when nothing is set', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({ role: 'all', port: 8080, host: '127.0.0.1', temporalAddress: undefined, databaseUrl: undefined, temporalUiPort: 8233, taskQueue: 'gantry' });
    expect(c.publicUrl).toBe('http://127.0.0.1:8080');
    expect(c.dataDir.endsWith('.gantry/data')).toBe(true);
  });

  it('reads the documented variables', () => {
    const c = loadConfig({ PORT: '9000', GANTRY_ROLE: 'api', TEMPORAL_ADDRESS: 'temporal:7233', DATABASE_URL: 'postgresql://x/y', GANTRY_PUBLIC_URL: 'https://gantry.example/' });
    expect(c).toMatchObject({ port: 9000, role: 'api', temporalAddress: 'temporal:7233', databaseUrl: 'postgresql://x/y', publicUrl: 'https://gantry.example' });
  });

  it('refuses nonsense with a message naming the variable', () => {
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(/PORT/);
    expect(() => loadConfig({ GANTRY_ROLE: 'both' })).toThrow(/GANTRY_ROLE/);
  });
});

describe('specProblems', () => {
  const ok = { endpointId: 'e', workersMin: 0, workersMax: 2, scalerType: 'QUEUE_DELAY' as const, scalerValue: 4, idleTimeout: 5, timeoutMs: 1000, releaseVersion: 1 };
  it('accepts a valid spec and names each broken rule', () => {
    expect(specProblems(ok)).toEqual([]);
    expect(specProblems({ ...ok, workersMin: 3 })).toEqual(['workers.min must not exceed workers.max']);
    expect(specProblems({ ...ok, scalerValue: 0.4, idleTimeout: -1 })).toEqual(['scaling.value must be >= 0.5', 'scaling.idleTimeout must be an integer >= 0']);
  });
});
