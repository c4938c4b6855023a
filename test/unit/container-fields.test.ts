/**
 * Findings 8, 10 and 11, the pure validators: image references by the distribution grammar, the
 * registry an image is pulled from, environment and size limits, ports, mount paths and int4.
 */
import { describe, expect, it } from 'vitest';
import { EnvSchema, IMAGE_REFERENCE, LIMITS, MountPathSchema, registryOf } from '../../domain/containers/index.ts';
import { CreateEndpointSchema } from '../../domain/endpoints/index.ts';
import { DomainError } from '../../domain/errors.ts';
import { validate } from '../../domain/shared/index.ts';
import type { TSchema } from 'typebox';

function failures(schema: TSchema, value: unknown): string[] {
  try {
    validate(schema, value);
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    return (err as DomainError).errors ?? [];
  }
  return [];
}

describe('image references', () => {
  it('accepts what the distribution grammar accepts', () => {
    for (const image of [
      'alpine',
      'alpine:3.20',
      'library/alpine:3.20',
      'docker.io/library/alpine:3.20',
      'ghcr.io/team/app_x-y.z:v1.2.3',
      'localhost:5000/x/y:z',
      'registry.example.com:5000/a/b@sha256:' + 'a'.repeat(64),
      'ghcr.io/team/app:1@sha256:' + 'f'.repeat(64),
      '[::1]:5000/app:1',
    ]) {
      expect(IMAGE_REFERENCE.test(image), image).toBe(true);
    }
  });

  it('refuses options, spaces, upper-case paths, bad tags and bad digests', () => {
    for (const image of [
      '--privileged',
      '-v/:/host',
      'img:1 --privileged',
      'img:1\n--privileged',
      'UPPER/app',
      'myhost/UPPER',
      'app:',
      'app:-x',
      'app@sha256:xyz',
      '/app',
      'app/',
      'a//b',
      ':tag',
      'app:' + 'x'.repeat(129),
    ]) {
      expect(IMAGE_REFERENCE.test(image), image).toBe(false);
    }
  });

  it('finds the registry an image is pulled from (docker.io for names without a host)', () => {
    expect(registryOf('alpine:3')).toBe('docker.io');
    expect(registryOf('team/app:1')).toBe('docker.io');
    expect(registryOf('ghcr.io/team/app:1')).toBe('ghcr.io');
    expect(registryOf('localhost/app:1')).toBe('localhost');
    expect(registryOf('registry.example.com:5000/app')).toBe('registry.example.com:5000');
    expect(registryOf('[::1]:5000/app:1')).toBe('[::1]:5000');
    expect(registryOf('GHCR.io/team/app:1')).toBe('ghcr.io');
  });

  it('limits a reference to 512 characters', () => {
    expect(failures(CreateEndpointSchema, { name: 'a', image: 'a'.repeat(510) + ':1' })).toEqual([]);
    expect(failures(CreateEndpointSchema, { name: 'a', image: 'a'.repeat(511) + ':1' })).toEqual([
      '$.image: must NOT have more than 512 characters',
    ]);
  });
});

describe('environment variables', () => {
  it('names are shell names of at most 128 characters', () => {
    for (const key of ['A=B', '', '1A', 'a.b', 'a-b', 'A B', 'x'.repeat(129)])
      expect(failures(EnvSchema, { [key]: 'v' }).length, JSON.stringify(key)).toBeGreaterThan(0);
    expect(failures(EnvSchema, { _A1: 'v', ['x'.repeat(128)]: 'v' })).toEqual([]);
  });

  it('values have no line breaks and at most 32 KiB; at most 100 entries and 64 KiB in all', () => {
    expect(failures(EnvSchema, { A: 'a\nb' })[0]).toMatch(/^\$\.A: /);
    expect(failures(EnvSchema, { A: 'a\rb' })[0]).toMatch(/^\$\.A: /);
    expect(failures(EnvSchema, { A: 'x'.repeat(LIMITS.envValueBytes + 1) })[0]).toMatch(
      /^\$\.A: must NOT have more than 32768 characters/,
    );
    expect(failures(EnvSchema, Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`K${i}`, 'v'])))).toEqual([
      '$: must NOT have more than 100 properties',
    ]);
    expect(failures(EnvSchema, { A: 'x'.repeat(30_000), B: 'x'.repeat(30_000), C: 'x'.repeat(6_000) })).toEqual([
      '$: must hold at most 65536 bytes of names and values (has 66003)',
    ]);
    expect(failures(EnvSchema, { A: 'x'.repeat(30_000), B: 'x'.repeat(30_000) })).toEqual([]);
  });
});

describe('other container fields', () => {
  it('args: at most 8 KiB of complete shell words', () => {
    expect(failures(CreateEndpointSchema, { name: 'a', image: 'b', args: 'x'.repeat(8 * 1024 + 1) })[0]).toMatch(
      /^\$\.args: must NOT have more than 8192 characters/,
    );
    expect(failures(CreateEndpointSchema, { name: 'a', image: 'b', args: 'python "unterminated' })[0]).toMatch(
      /^\$\.args: unterminated/,
    );
  });

  it('ports: 1-65535 with http, tcp or udp, at most 64', () => {
    for (const port of ['0/tcp', '65536/tcp', '99999/http', '80', '80/sctp', '080x/tcp']) {
      expect(failures(CreateEndpointSchema, { name: 'a', image: 'b', ports: [port] })[0], port).toMatch(
        /^\$\.ports\[0\]: /,
      );
    }
    expect(
      failures(CreateEndpointSchema, { name: 'a', image: 'b', ports: ['1/tcp', '65535/udp', '8000/http'] }),
    ).toEqual([]);
    expect(
      failures(CreateEndpointSchema, {
        name: 'a',
        image: 'b',
        ports: Array.from({ length: 65 }, (_, i) => `${i + 1}/tcp`),
      }),
    ).toEqual(['$.ports: must NOT have more than 64 items']);
  });

  it('ids and lists are bounded', () => {
    expect(failures(CreateEndpointSchema, { name: 'a', image: 'b', registry: 'x'.repeat(201) })[0]).toMatch(
      /^\$\.registry: /,
    );
    expect(
      failures(CreateEndpointSchema, {
        name: 'a',
        image: 'b',
        dataCenterIds: Array.from({ length: 65 }, (_, i) => `dc-${i}`),
      }),
    ).toEqual(['$.dataCenterIds: must NOT have more than 64 items']);
  });

  it('mount paths: absolute, no commas or control characters', () => {
    for (const path of ['/data\nx', '/data\0', 'relative', '/a,b'])
      expect(failures(MountPathSchema, path).length, JSON.stringify(path)).toBeGreaterThan(0);
    expect(failures(MountPathSchema, '/workspace/data')).toEqual([]);
  });

  it('integers stay within PostgreSQL integer', () => {
    expect(failures(CreateEndpointSchema, { name: 'a', image: 'b', timeout: 137_438_953_471 })).toEqual([
      '$.timeout: must be <= 2147483647',
    ]);
    expect(failures(CreateEndpointSchema, { name: 'a', image: 'b', workers: { min: 0, max: 2 ** 31 } })).toEqual([
      '$.workers.max: must be <= 2147483647',
    ]);
  });
});
