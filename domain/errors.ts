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
