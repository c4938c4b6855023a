/**
 * Where a plain `gantry deploy` goes (cli/src/commands/deploy/deploy.ts planTarget): `gantry dev`'s
 * own environment never counts, so the README's flow (dev, then deploy) works as written.
 */
import { expect, it } from 'vitest';
import type { App } from '../../cli/src/api.ts';
import { planTarget } from '../../cli/src/commands/deploy/deploy.ts';

const app = (...environments: string[]): App =>
  ({ name: 'shop', environments: environments.map((name) => ({ name })) }) as unknown as App;

it('after gantry dev made the live environment, a plain deploy goes to production', () => {
  expect(planTarget('shop', undefined, app('live'))).toEqual({
    app: 'shop',
    env: 'production',
    createApp: false,
    createEnv: true,
  });
  expect(planTarget('shop', undefined, app('production', 'live'))).toEqual({
    app: 'shop',
    env: 'production',
    createApp: false,
    createEnv: false,
  });
  expect(planTarget('shop', undefined, app('staging', 'live')).env).toBe('staging');
});

it('still asks when several environments besides live could be meant, and obeys --env, live included', () => {
  expect(() => planTarget('shop', undefined, app('production', 'staging', 'live'))).toThrow(
    /2 environments \(production, staging\); choose one with --env NAME/,
  );
  expect(planTarget('shop', 'live', app('production', 'live'))).toMatchObject({ env: 'live', createEnv: false });
  expect(planTarget('shop', 'qa', app('production'))).toMatchObject({ env: 'qa', createEnv: true });
});

it('shows a deployment under way beside the current build in app and env listings', async () => {
  const { buildColumn } = await import('../../cli/src/commands/app.ts');
  const env = { id: 'e', name: 'production', createdAt: '', currentBuildId: 'b1', endpoints: [] };
  expect(buildColumn(env)).toBe('b1');
  expect(buildColumn({ ...env, deploying: { deploymentId: 'd', buildId: 'b2', startedAt: '' } })).toBe(
    'b1 (deploying b2)',
  );
  expect(buildColumn({ ...env, currentBuildId: null, deploying: null })).toBe('-');
});
