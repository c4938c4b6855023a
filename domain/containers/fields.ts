/**
 * The container fields a tenant writes (endpoints, templates, pods; REST and GraphQL): one set of
 * schemas, so whatever is accepted here can be started by a worker, and nothing a tenant writes can
 * turn into a container runtime option or an unbounded command.
 */
import { Type } from 'typebox';
import { SHELL_WORDS } from '../shared/validation.ts';

export const LIMITS = {
  imageBytes: 512,
  argsBytes: 8 * 1024,
  envEntries: 100,
  envKeyBytes: 128,
  envValueBytes: 32 * 1024,
  envTotalBytes: 64 * 1024,
  mountPathBytes: 1024,
} as const;

/**
 * An image reference as the distribution grammar defines it (`[domain[:port]/]path[:tag][@digest]`,
 * lower-case path components, tags of word characters, `algorithm:hex` digests). Anything else,
 * notably a leading `-`, never reaches a container runtime's command line.
 */
const DOMAIN_COMPONENT = '(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])';
const DOMAIN = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[0-9A-Fa-f:]+\\])(?::[0-9]+)?`;
/**
 * The first component of a name is its registry only when it looks like a host (a dot, a port or
 * `localhost`, as the runtimes normalize names); otherwise it is a lower-case path component of a
 * Docker Hub name, so `UPPER/app` is refused here as the runtimes would refuse it at every pull.
 */
const REGISTRY_HOST = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})+(?::[0-9]+)?|${DOMAIN_COMPONENT}:[0-9]+|localhost|\\[[0-9A-Fa-f:]+\\](?::[0-9]+)?)`;
const PATH_COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const TAG = '[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}';
export const IMAGE_REFERENCE = new RegExp(
  `^(?:${REGISTRY_HOST}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*(?::${TAG})?(?:@${DIGEST})?$`,
);

export { registryOf } from '../../hostctl/image-references.ts';

/** A registry host as image references name it: `ghcr.io`, `registry.example.com:5000`, `localhost`. */
export const RegistryHostSchema = Type.String({
  minLength: 1,
  maxLength: 255,
  pattern: `^${DOMAIN}$`,
  description: 'the registry host this credential may be sent to (default: the name when it is a host, else docker.io)',
});

export const ImageSchema = Type.String({
  minLength: 1,
  maxLength: LIMITS.imageBytes,
  pattern: IMAGE_REFERENCE.source,
  description: 'container image reference: [registry[:port]/]repository[:tag][@digest]',
});

export const ArgsSchema = Type.String({
  maxLength: LIMITS.argsBytes,
  ...SHELL_WORDS,
  description: "overrides the image's start command; empty keeps the image's own",
});

/** What `--env-file` can carry: a shell-style name; values without line breaks (checked where the file is written). */
export const ENV_KEY_PATTERN = '^[A-Za-z_][A-Za-z0-9_]*$';

export const EnvSchema = Type.Record(
  Type.String(),
  Type.String({ maxLength: LIMITS.envValueBytes, pattern: '^[^\\r\\n]*$' }),
  {
    propertyNames: { pattern: ENV_KEY_PATTERN, maxLength: LIMITS.envKeyBytes },
    maxProperties: LIMITS.envEntries,
    'x-env-total': LIMITS.envTotalBytes,
    description: `environment variables: names matching ${ENV_KEY_PATTERN}, at most ${LIMITS.envEntries}, ${LIMITS.envTotalBytes} bytes in all`,
  },
);

/** The `[{key, value}]` shape GraphQL uses for the same variables. */
export const EnvKeyValueSchema = Type.Object(
  {
    key: Type.String({ pattern: ENV_KEY_PATTERN, maxLength: LIMITS.envKeyBytes }),
    value: Type.String({ maxLength: LIMITS.envValueBytes, pattern: '^[^\\r\\n]*$' }),
  },
  { additionalProperties: false },
);
export const EnvListSchema = Type.Array(EnvKeyValueSchema, {
  maxItems: LIMITS.envEntries,
  'x-env-total': LIMITS.envTotalBytes,
});

/** An absolute path inside the container: no commas (mount syntax) and no control characters. */
export const MountPathSchema = Type.String({
  pattern: '^/[^,\\x00-\\x1f\\x7f]*$',
  maxLength: LIMITS.mountPathBytes,
  description: 'absolute path inside the container, without commas or control characters',
});
