/**
 * How the probe judges a Docker daemon's walls from its iptables listings (activities/host-probe.ts,
 * DockerWalls). The listings are Docker 20.10's, as test/integration/docker-walls.test.ts's daemon
 * wrote them.
 */
import { describe, expect, it } from 'vitest';
import { dockerWallsOf, parseProbeOutput } from '../../activities/host-probe.ts';

const HAIRPIN =
  '-N DOCKER;-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER;-A OUTPUT -m addrtype --dst-type LOCAL -j DOCKER;';
const PROXY =
  '-N DOCKER;-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER;-A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER;';

const kv = (entries: Record<string, string>) => new Map(Object.entries(entries));

describe('dockerWallsOf', () => {
  it('accepts iptables with hairpin NAT (userland proxy off)', () => {
    expect(dockerWallsOf(kv({ firewall: 'null', 'nat:iptables': HAIRPIN, 'nat:iptables-legacy': '' }))).toEqual({
      iptables: 'on',
      userlandProxy: false,
      problem: undefined,
    });
  });

  it("refuses the userland proxy, found in whichever backend Docker's rules are", () => {
    const w = dockerWallsOf(kv({ 'nat:iptables': '', 'nat:iptables-legacy': PROXY }));
    expect(w).toMatchObject({ iptables: 'on', userlandProxy: true });
    expect(w.problem).toMatch(/userland proxy is on.*"userland-proxy": false/);
  });

  it('refuses a daemon without iptables rules', () => {
    const w = dockerWallsOf(kv({ 'nat:iptables': '', 'nat:iptables-nft': '' }));
    expect(w).toMatchObject({ iptables: 'off', userlandProxy: undefined });
    expect(w.problem).toMatch(/manages no iptables rules.*--iptables=false/);
  });

  it('says nothing it does not know: unreadable tables, no bridge yet, nftables backend, old probe output', () => {
    const unknown = { iptables: 'unknown', userlandProxy: undefined, problem: undefined };
    expect(dockerWallsOf(kv({ 'nat:iptables': 'unreadable' }))).toEqual(unknown);
    expect(dockerWallsOf(kv({}))).toEqual(unknown);
    expect(dockerWallsOf(kv({ firewall: '{"Driver":"nftables"}', 'nat:iptables': '' }))).toEqual(unknown);
    expect(dockerWallsOf(kv({ 'nat:iptables': '-N DOCKER;' }))).toEqual({
      iptables: 'on',
      userlandProxy: undefined,
      problem: undefined,
    });
  });

  it('is read for a real Docker engine only', () => {
    const probe = (version: string) =>
      parseProbeOutput(
        [
          '@@gantry-probe:runtime:docker',
          'path=/usr/bin/docker',
          `version=${version}`,
          'usable=1',
          'nat:iptables=',
          '@@gantry-probe:end',
          '',
        ].join('\n'),
      );
    expect(probe('Docker version 20.10.24+dfsg1').containerRuntime?.walls?.iptables).toBe('off');
    expect(probe('podman version 4.9.3').runtimes[0]?.walls).toBeUndefined();
  });
});
