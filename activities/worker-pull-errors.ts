/**
 * Why an image could not be pulled, in plain words, read from what the container runtime printed
 * (Podman's and Docker's messages; test/unit/worker-pull-errors.test.ts holds real ones). Used by
 * prepareWorkerImage (activities/worker-start.ts): the worker's failure reason, and with it the
 * endpoint's worker problem, leads with the plain words and keeps the runtime's message after them.
 */
import { registryOf } from '../hostctl/image-references.ts';

export type PullTrouble =
  | 'invalid-name'
  | 'credentials'
  | 'denied'
  | 'not-found'
  | 'dns'
  | 'refused'
  | 'timeout'
  | 'unreachable'
  | 'tls'
  | 'unknown';

/** Tried in order: the first that matches names the trouble (a refusal before "does not exist", which it may contain). */
const TROUBLES: ReadonlyArray<readonly [Exclude<PullTrouble, 'unknown'>, RegExp]> = [
  ['invalid-name', /invalid reference format|repository name must be lowercase|invalid repository name/i],
  // `podman login`/`docker login` refused the stored username or password.
  [
    'credentials',
    /incorrect username or password|invalid username\/password|logging into "[^"]*": .*(unauthorized|denied)/i,
  ],
  [
    'denied',
    /requested access to the resource is denied|pull access denied|may require 'docker login'|\bunauthorized\b|authentication required|(?<!permission )\bdenied\b|StatusCode: 40[13]\b|403 Forbidden/i,
  ],
  [
    'not-found',
    /manifest unknown|name unknown|repository name not known|manifest for \S+ not found|\bnot found: manifest|StatusCode: 404\b|404 Not Found|no such image/i,
  ],
  [
    'dns',
    /no such host|server misbehaving|temporary failure in name resolution|name or service not known|could not resolve host/i,
  ],
  ['refused', /connection refused/i],
  [
    'timeout',
    /i\/o timeout|Client\.Timeout exceeded|TLS handshake timeout|context deadline exceeded|timeout awaiting|command timed out|timed out/i,
  ],
  ['unreachable', /network is unreachable|no route to host|connection reset by peer|host is unreachable/i],
  [
    'tls',
    /server gave HTTP response to HTTPS client|x509:|certificate (signed by unknown authority|is not valid|has expired)|tls: /i,
  ],
];

/** Which trouble the runtime's message shows; `unknown` when none of the known ones. */
export function pullTroubleOf(message: string): PullTrouble {
  return TROUBLES.find(([, re]) => re.test(message))?.[0] ?? 'unknown';
}

/** The trouble in plain words, for `image` on `registry`; undefined when it cannot be told. */
function plainWords(trouble: PullTrouble, image: string, registry: string): string | undefined {
  switch (trouble) {
    case 'invalid-name':
      return `'${image}' is not a valid image name`;
    case 'credentials':
      return `${registry} refused the username or password of the endpoint's registry credential`;
    case 'denied':
      return `${registry} refused it: the image does not exist there or needs credentials (check the name and tag, or give the endpoint a registry credential)`;
    case 'not-found':
      return `${registry} has no such image (check the name and tag)`;
    case 'dns':
      return `the host could not look up ${registry} (DNS): a network problem on the host, or a misspelt registry`;
    case 'refused':
      return `${registry} refused the connection: nothing listens there, or the host may not reach it`;
    case 'timeout':
      return `${registry} did not answer in time: a network problem, or a slow or unreachable registry`;
    case 'unreachable':
      return `the host cannot reach ${registry} over the network`;
    case 'tls':
      return `the TLS connection to ${registry} failed (a plain-HTTP registry, or a certificate the host does not trust)`;
    case 'unknown':
      return undefined;
  }
}

/**
 * The reason a worker could not get `image`: "could not pull <image>: <plain words>; <the runtime's
 * message>", or the message alone when its trouble cannot be told.
 */
export function describePullFailure(image: string, message: string): string {
  const plain = plainWords(pullTroubleOf(message), image, registryOf(image));
  return plain ? `could not pull ${image}: ${plain}; ${message}` : message;
}
