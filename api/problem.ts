import { STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError, RetryLater, type DomainErrorKind } from '../domain/errors.ts';

/** RFC 9457 problem details, the error shape of every REST answer. */
export interface Problem {
  title: string;
  status: number;
  detail: string;
  errors?: string[];
}

const STATUS_OF: Record<DomainErrorKind, number> = {
  bad_request: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  gone: 410,
  validation: 422,
  rate_limited: 429,
  unavailable: 503,
};

export function problem(status: number, detail: string, errors?: string[]): Problem {
  return { title: STATUS_CODES[status] ?? 'Error', status, detail, ...(errors && errors.length > 0 ? { errors } : {}) };
}

export function sendProblem(reply: FastifyReply, p: Problem): FastifyReply {
  return reply.code(p.status).type('application/problem+json').send(p);
}

/** A domain error's problem and the headers that go with it; undefined for anything else. */
export function problemOf(err: unknown): { problem: Problem; headers: Record<string, string> } | undefined {
  if (!(err instanceof DomainError)) return undefined;
  return {
    problem: problem(STATUS_OF[err.kind], err.message, err.errors),
    headers: err instanceof RetryLater ? { 'retry-after': String(err.retryAfterSeconds) } : {},
  };
}

/** Maps anything thrown in a route to a problem+json answer; 5xx details never leak internals. */
export function errorHandler(err: FastifyError | Error, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const domain = problemOf(err);
  if (domain) {
    for (const [name, value] of Object.entries(domain.headers)) reply.header(name, value);
    return sendProblem(reply, domain.problem);
  }
  const fe = err as FastifyError;
  if (fe.validation) {
    // Fastify's own schema validation (params, query): same wording as the domain validator.
    const errors = fe.validation.map((v) => `$${v.instancePath.replace(/\//g, '.')}: ${v.message ?? 'is invalid'}`);
    return sendProblem(reply, problem(422, 'Request validation failed.', errors));
  }
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
    // Malformed JSON, wrong content type, body too large, ...
    return sendProblem(reply, problem(fe.statusCode, fe.message));
  }
  request.log.error({ err }, 'unhandled error');
  return sendProblem(reply, problem(500, 'internal error; the request was not completed'));
}
