import type { FastifyInstance } from 'fastify';

/**
 * The methods whose requests carry no body in any route of this API: a `DELETE` (or `OPTIONS`, or
 * a `GET` or `HEAD`, whose bodies Fastify does not read) sent with `Content-Type: application/json`
 * and nothing after it, as many HTTP clients send every call, means no body everywhere.
 */
export const BODILESS_METHODS: ReadonlySet<string> = new Set(['DELETE', 'OPTIONS', 'GET', 'HEAD']);

/**
 * In `scope` (an encapsulated plugin, or the app itself, whose scopes inherit it), an empty
 * `application/json` body means "no body", as if no Content-Type had been sent: for every method, or
 * only for `methods`. The hosted service's clients send bodiless calls (job cancel and purge-queue,
 * pod actions, deletes) with `Content-Type: application/json` and nothing after it, which Fastify's
 * own parser refuses with 400. Any non-empty body, and an empty one of any other method, goes to
 * Fastify's own JSON parser with the app's settings (the same errors, the same prototype-poisoning
 * rules); route body limits still apply. The route's handler or schema decides what a missing body
 * means.
 */
export function acceptEmptyJsonBodies(scope: FastifyInstance, methods?: ReadonlySet<string>): void {
  const parseJson = scope.getDefaultJsonParser(
    scope.initialConfig.onProtoPoisoning ?? 'error',
    scope.initialConfig.onConstructorPoisoning ?? 'error',
  );
  scope.removeContentTypeParser('application/json');
  scope.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body.length === 0 && (!methods || methods.has(request.method))) done(null, undefined);
    else parseJson(request, body as string, done);
  });
}
