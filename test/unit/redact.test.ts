/** Credentials in URLs never reach a log line: every spelling the query parser decodes to a secret name. */
import { describe, expect, it } from 'vitest';
import { redactUrl } from '../../api/redact.ts';

describe('redactUrl', () => {
  it('redacts secret parameters by their decoded names, whatever their spelling', () => {
    for (const name of [
      'api_key',
      'api%5Fkey',
      'api%5fkey',
      '%61pi_key',
      'API_KEY',
      'apikey',
      'token',
      'sig',
      'access%5Ftoken',
    ]) {
      expect(redactUrl(`/v2/x?a=1&${name}=SECRET&b=2`)).toBe(`/v2/x?a=1&${name}=[redacted]&b=2`);
    }
  });

  it('keeps other parameters and the path as they are', () => {
    expect(redactUrl('/v2/serverless?limit=5&api=1&keys=2')).toBe('/v2/serverless?limit=5&api=1&keys=2');
    expect(redactUrl('/healthz')).toBe('/healthz');
  });

  it('drops matrix parameters of the path, which no route reads', () => {
    expect(redactUrl('/graphql;api_key=SECRET')).toBe('/graphql;[redacted]');
    expect(redactUrl('/graphql;api_key=SECRET?x=1&api_key=S2')).toBe('/graphql;[redacted]?x=1&api_key=[redacted]');
  });

  it('reads past a name that is not validly encoded, and still redacts the rest', () => {
    // A lookalike of a secret name is redacted like one (issue #45), however it is spelled.
    expect(redactUrl('/v2/x?api_key%=SECRET')).toBe('/v2/x?api_key%=[redacted]');
    expect(redactUrl('/v2/x?apix%=SECRET')).toBe('/v2/x?apix%=SECRET');
    expect(redactUrl('/v2/x?%E0%A4%A=1&token=SECRET')).toBe('/v2/x?%E0%A4%A=1&token=[redacted]');
  });
});
