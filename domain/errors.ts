/**
 * Domain errors: what went wrong in terms REST (problem+json) and GraphQL (extensions.code) both map.
 */
export type DomainErrorKind =
  | 'bad_request'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'gone'
  | 'validation'
  | 'rate_limited'
  | 'unavailable';

export class DomainError extends Error {
  constructor(
    readonly kind: DomainErrorKind,
    message: string,
    /** Individual validation failures, as `<json path>: <message>`. */
    readonly errors?: string[],
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

export const notFound = (what = 'resource'): DomainError => new DomainError('not_found', `${what} not found`);
export const forbidden = (detail = 'access denied'): DomainError => new DomainError('forbidden', detail);
export const validationFailed = (errors: string[]): DomainError =>
  new DomainError('validation', 'Request validation failed.', errors);

/**
 * Runs an operation for a surface that names fields otherwise (REST's pod shape, the hosted
 * network-volume shape): the refusals' `$.<field>` become `$.<paths[field]>`, nothing else changes.
 */
export async function inFieldNames<T>(paths: Record<string, string>, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (!(err instanceof DomainError) || !err.errors) throw err;
    const errors = err.errors.map((e) =>
      e.replace(/^\$\.([A-Za-z]+)/, (whole, field: string) =>
        Object.hasOwn(paths, field) ? `$.${paths[field]}` : whole,
      ),
    );
    throw new DomainError(err.kind, err.message, errors);
  }
}

/** A 403 for a credential that was forged, not merely insufficient (a signed URL whose signature is wrong): it counts as a failed authentication. */
export class ForgedCredential extends DomainError {
  constructor(detail: string) {
    super('forbidden', detail);
  }
}

/** A 429 that says when to come back (Retry-After), for limits other than the request quotas (which set their own headers). */
export class RetryLater extends DomainError {
  constructor(
    detail: string,
    readonly retryAfterSeconds: number,
  ) {
    super('rate_limited', detail);
  }
}
