import type { FastifyInstance } from 'fastify';

/**
 * In `scope` (an encapsulated plugin), an empty `application/json` body means "no body", as if no
 * Content-Type had been sent: the hosted service's clients send bodiless calls (job cancel and
 * purge-queue, pod actions) with `Content-Type: application/json` and nothing after it, which
 * Fastify's own parser refuses with 400. Any non-empty body goes to Fastify's own JSON parser with
 * the app's settings (the same errors, the same prototype-poisoning rules); route body limits
 * still apply. The route's handler or schema decides what a missing body means.
 */
export function acceptEmptyJsonBodies(scope: FastifyInstance): void {
  const parseJson = scope.getDefaultJsonParser(
    scope.initialConfig.onProtoPoisoning ?? 'error',
    scope.initialConfig.onConstructorPoisoning ?? 'error',
  );
  scope.removeContentTypeParser('application/json');
  scope.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body.length === 0) done(null, undefined);
    else parseJson(request, body as string, done);
  });
}
