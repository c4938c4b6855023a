/**
 * The pull-error classifier (activities/worker-pull-errors.ts) on real messages. The Podman ones
 * were printed by this machine's Podman 4.3 (`podman pull` of docker.io/library/nonexistent-xyz:1
 * without DNS for docker.io, of localhost:1/x, and against a local HTTP server answering as a
 * registry does: 401, 404 with MANIFEST_UNKNOWN and NAME_UNKNOWN, 403, a bare 404, plain HTTP, and
 * `podman login` refused by its 401); the
 * Docker ones and the Docker Hub ones as their users report them (the daemon's wording has been
 * stable for years). Each case is the whole line Gantry records (`failure()` in hostctl/containers.ts).
 */
import { describe, expect, it } from 'vitest';
import { describePullFailure, pullTroubleOf, type PullTrouble } from '../../activities/worker-pull-errors.ts';

const IMAGE = 'docker.io/library/gantry-no-such-image:1';
/** How ensureImage words a failed pull, around the runtime's last lines. */
const pulled = (detail: string, image = IMAGE) =>
  `pulling ${image} (an image already on the host is not used in its place) failed (exit 125): ${detail}`;

const CASES: Array<[string, PullTrouble, string]> = [
  // Podman, captured here.
  [
    'podman: no DNS for docker.io',
    'dns',
    pulled(
      'Error: initializing source docker://nonexistent-xyz:1: pinging container registry registry-1.docker.io: Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: no such host',
    ),
  ],
  [
    'podman: nothing listens',
    'refused',
    pulled(
      'Error: initializing source docker://localhost:1/x:latest: pinging container registry localhost:1: Get "https://localhost:1/v2/": dial tcp 127.0.0.1:1: connect: connection refused',
      'localhost:1/x',
    ),
  ],
  [
    'podman: 401 from the registry',
    'denied',
    pulled(
      'Error: initializing source docker://127.0.0.1:5801/team/app:1: reading manifest 1 in 127.0.0.1:5801/team/app: unauthorized',
    ),
  ],
  [
    'podman: 403 from the registry',
    'denied',
    pulled(
      'Error: initializing source docker://127.0.0.1:5804/team/app:1: reading manifest 1 in 127.0.0.1:5804/team/app: denied',
    ),
  ],
  [
    'podman: no such tag',
    'not-found',
    pulled(
      'Error: initializing source docker://127.0.0.1:5802/team/app:1: reading manifest 1 in 127.0.0.1:5802/team/app: manifest unknown: manifest unknown',
    ),
  ],
  [
    'podman: no such repository',
    'not-found',
    pulled(
      'Error: initializing source docker://127.0.0.1:5803/team/app:1: reading manifest 1 in 127.0.0.1:5803/team/app: name unknown: repository name not known to registry',
    ),
  ],
  [
    'podman: a bare 404',
    'not-found',
    pulled(
      'Error: initializing source docker://127.0.0.1:5805/team/app:1: reading manifest 1 in 127.0.0.1:5805/team/app: StatusCode: 404, 404 page not found',
    ),
  ],
  [
    'podman: a plain-HTTP registry',
    'tls',
    pulled(
      'Error: initializing source docker://127.0.0.1:5813/team/app:1: pinging container registry 127.0.0.1:5813: Get "https://127.0.0.1:5813/v2/": http: server gave HTTP response to HTTPS client',
    ),
  ],
  ['podman: upper case', 'invalid-name', pulled('Error: repository name must be lowercase')],
  ['podman: not a reference', 'invalid-name', pulled('Error: invalid reference format')],
  // Podman and Docker against Docker Hub, as reported by their users.
  [
    'podman: Docker Hub, no such repository',
    'denied',
    pulled(
      'Error: initializing source docker://jasonacox/weather41:0.2.2: reading manifest 0.2.2 in docker.io/jasonacox/weather41: requested access to the resource is denied',
    ),
  ],
  [
    'docker: Docker Hub, no such repository',
    'denied',
    pulled(
      "Error response from daemon: pull access denied for gantry-no-such-image, repository does not exist or may require 'docker login': denied: requested access to the resource is denied",
    ),
  ],
  [
    'docker: no such tag',
    'not-found',
    pulled('Error response from daemon: manifest for alpine:9.99 not found: manifest unknown: manifest unknown'),
  ],
  [
    'docker: no DNS',
    'dns',
    pulled(
      'Error response from daemon: Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 127.0.0.53:53: server misbehaving',
    ),
  ],
  [
    'docker: no answer',
    'timeout',
    pulled(
      'Error response from daemon: Get "https://registry-1.docker.io/v2/": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)',
    ),
  ],
  [
    'docker: no route',
    'unreachable',
    pulled('Error response from daemon: Get "https://10.1.2.3/v2/": dial tcp 10.1.2.3:443: connect: no route to host'),
  ],
  [
    'docker: wrong password',
    'credentials',
    'Error response from daemon: Get "https://registry.example.com/v2/": unauthorized: incorrect username or password',
  ],
  ['podman: wrong password', 'credentials', 'Error: logging into "registry.example.com": invalid username/password'],
  // Gantry's own: a pull that outlived pullTimeoutSec.
  ['the pull timed out', 'timeout', `command timed out after 600000 ms: podman pull --quiet -- ${IMAGE}`],
];

describe('pull errors in plain words', () => {
  it.each(CASES)('%s: %s', (_name, trouble, message) => {
    expect(pullTroubleOf(message)).toBe(trouble);
  });

  it('leads with the plain words, names the image and its registry, and keeps the runtime message after them', () => {
    const dns = CASES[0]![2];
    expect(describePullFailure(IMAGE, dns)).toBe(
      `could not pull ${IMAGE}: the host could not look up docker.io (DNS): a network problem on the host, or a misspelt registry; ${dns}`,
    );
    const denied = CASES[11]![2];
    expect(describePullFailure(IMAGE, denied)).toMatch(
      new RegExp(
        `^could not pull ${IMAGE}: docker\\.io refused it: the image does not exist there or needs credentials .*; pulling ${IMAGE} `,
      ),
    );
    const missing = CASES[4]![2];
    expect(describePullFailure('127.0.0.1:5802/team/app:1', missing)).toMatch(
      /^could not pull 127\.0\.0\.1:5802\/team\/app:1: 127\.0\.0\.1:5802 has no such image \(check the name and tag\); pulling /,
    );
    expect(describePullFailure('localhost:1/x', CASES[1]![2])).toMatch(
      /^could not pull localhost:1\/x: localhost:1 refused the connection/,
    );
  });

  it('leaves a message it cannot read as it is', () => {
    const odd = pulled('Error: writing blob: adding layer with blob "sha256:ab": no space left on device');
    expect(pullTroubleOf(odd)).toBe('unknown');
    expect(describePullFailure(IMAGE, odd)).toBe(odd);
    // The host's own storage refusing a write is no registry's refusal.
    const local = pulled(
      'Error: copying system image from manifest list: writing blob: adding layer with blob "sha256:ab": open /var/lib/containers/storage/overlay/l/ABC: permission denied',
    );
    expect(pullTroubleOf(local)).toBe('unknown');
    // Nor is a local image that is not on the host (Gantry's own words, plain already).
    const missing =
      'the image localhost/app:1 is not on this host: localhost/ images are built or loaded on the host itself, never pulled';
    expect(describePullFailure('localhost/app:1', missing)).toBe(missing);
  });
});
