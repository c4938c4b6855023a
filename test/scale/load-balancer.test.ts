/**
 * The scale-out scenario's round-robin balancer (support.ts) with one backend dead, as after the
 * scenario's kill -9 of an API process: every new connection must reach the live backend. The
 * balancer once drew each retry from the round-robin counter that all connections share, so of
 * connections opened together one could be sent to the dead backend twice and closed unanswered:
 * the scenario's stray "other side closed" failures long after the kill.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/ports.ts';
import { startLoadBalancer, type LoadBalancer } from './support.ts';

let live: http.Server | undefined;
let lb: LoadBalancer | undefined;

beforeAll(async () => {
  live = http.createServer((_req, res) => res.end('live'));
  await new Promise<void>((resolve) => live!.listen(0, '127.0.0.1', resolve));
  // Nothing listens there: connections to it are refused, as to a killed process.
  const dead = { host: '127.0.0.1', port: await freePort() };
  lb = await startLoadBalancer([dead, { host: '127.0.0.1', port: (live.address() as AddressInfo).port }]);
});

afterAll(async () => {
  await lb?.close();
  await new Promise((resolve) => live?.close(resolve));
});

/** One request on a connection of its own; its status, or how it failed. */
const request = (url: string): Promise<string> =>
  new Promise((resolve) => {
    const req = http.get(url, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(String(res.statusCode)));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });

describe('the scale-out round-robin balancer with a dead backend', () => {
  it('sends every connection to the live backend, connections opened together included', async () => {
    for (let round = 0; round < 5; round++) {
      const answers = await Promise.all(Array.from({ length: 20 }, () => request(lb!.url)));
      expect(answers).toEqual(Array(20).fill('200'));
    }
    // Each refused connection went on to the live backend: one retry per connection that met the dead one.
    expect(lb!.connections).toEqual([0, 100]);
    expect(lb!.retried).toBeGreaterThan(0);
  });
});
