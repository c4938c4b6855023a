import { describe, expect, it } from 'vitest';
import { CreateEndpointSchema } from '../../domain/endpoints/index.ts';
import { DomainError } from '../../domain/errors.ts';
import { validate } from '../../domain/shared/index.ts';

function failures(body: unknown): string[] {
  try {
    validate(CreateEndpointSchema, body);
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    return (err as DomainError).errors ?? [];
  }
  throw new Error('expected a validation failure');
}

describe('request validation messages', () => {
  it('names an unknown property exactly as the spec does, at any depth', () => {
    expect(failures({ name: 'a', image: 'b', extra: 1 })).toEqual(["$: additional properties 'extra' not allowed"]);
    expect(failures({ name: 'a', image: 'b', workers: { min: 0, max: 1, burst: 2 } })).toEqual([
      "$.workers: additional properties 'burst' not allowed",
    ]);
  });

  it('lists every failure with its JSON path', () => {
    const errors = failures({ name: '', image: 'b', disk: 0, ports: ['80/http', 'x'], env: { A: 1 } });
    expect(errors).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^\$\.name: /),
        expect.stringMatching(/^\$\.disk: must be >= 1/),
        expect.stringMatching(/^\$\.ports\[1\]: /),
        expect.stringMatching(/^\$\.env\.A: must be string/),
      ]),
    );
  });

  it('reports a missing required property', () => {
    expect(failures({ image: 'b' })).toEqual(["$: missing property 'name'"]);
  });

  it('passes a valid body and fills schema defaults', () => {
    const v = validate(CreateEndpointSchema, { name: 'a', image: 'b', gpu: { pools: ['ADA_24'] } });
    expect(v.gpu?.count).toBe(1);
  });
});
