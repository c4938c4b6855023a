/** The address of a load-balancing endpoint (`requestUrls.base`), from the public URL and GANTRY_LB_DOMAIN. */
import { describe, expect, it } from 'vitest';
import { loadBalancerBaseUrl } from '../../domain/endpoints/index.ts';

describe('loadBalancerBaseUrl', () => {
  it('is the path under the public URL without a domain, the wildcard name with one', () => {
    expect(loadBalancerBaseUrl('abc', 'http://h:1', '')).toBe('http://h:1/lb/abc');
    expect(loadBalancerBaseUrl('abc', 'http://h:1', undefined)).toBe('http://h:1/lb/abc');
    expect(loadBalancerBaseUrl('abc', 'http://h:1', '.wild.example.')).toBe('https://abc.wild.example');
  });

  it("keeps the port of an https public URL (the API serving TLS there), never an http one's", () => {
    expect(loadBalancerBaseUrl('abc', 'https://h:8443', 'wild.example')).toBe('https://abc.wild.example:8443');
    expect(loadBalancerBaseUrl('abc', 'https://h', 'wild.example')).toBe('https://abc.wild.example');
    expect(loadBalancerBaseUrl('abc', 'http://h:8080', 'wild.example')).toBe('https://abc.wild.example');
  });
});
