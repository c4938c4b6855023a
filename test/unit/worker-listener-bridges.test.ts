/** Which connections the worker-facing listener keeps (api/worker-listener.ts createBridgeCheck). */
import { expect, it } from 'vitest';
import { createBridgeCheck, type BridgeAddress } from '../../api/worker-listener.ts';

it('keeps a connection from a bridge subnet to that bridge address, and nothing else', async () => {
  let bridges: BridgeAddress[] = [
    { name: 'cni-podman0', address: '10.88.0.1', prefix: 16 },
    { name: 'cni-podman3', address: '10.89.2.1', prefix: 24 },
    { name: 'eth0', address: '192.0.2.2', prefix: 24 },
  ];
  let reads = 0;
  const fromContainer = createBridgeCheck(() => {
    reads++;
    return bridges;
  });
  expect(fromContainer('10.89.2.1', '10.89.2.7')).toBe(true);
  expect(fromContainer('10.88.0.1', '10.88.0.1')).toBe(true); // the host's own process on the bridge address
  // Another network's container to this gateway, the LAN to the host's address, loopback, IPv6: no.
  expect(fromContainer('10.89.2.1', '10.88.0.5')).toBe(false);
  expect(fromContainer('192.0.2.2', '192.0.2.9')).toBe(false);
  expect(fromContainer('127.0.0.1', '127.0.0.1')).toBe(false);
  expect(fromContainer('::1', '::1')).toBe(false);
  expect(fromContainer(undefined, '10.89.2.7')).toBe(false);
  // A bridge that appears later is read again on a miss, at most every 50 ms.
  const before = reads;
  bridges = [...bridges, { name: 'cni-podman4', address: '10.89.3.1', prefix: 24 }];
  await new Promise((r) => setTimeout(r, 80));
  expect(fromContainer('10.89.3.1', '10.89.3.2')).toBe(true);
  for (let i = 0; i < 50; i++) fromContainer('192.0.2.2', '192.0.2.9');
  expect(reads - before).toBeLessThanOrEqual(2);
});
