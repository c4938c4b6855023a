/** What container runtimes make of an image reference: where it is pulled from, and whether it can change. */

/** The registry host of an image reference (`docker.io` for bare names such as `alpine:3.20`); host names are case-insensitive. */
export function registryOf(image: string): string {
  const first = image.split('/')[0]!;
  if (!image.includes('/')) return 'docker.io';
  return first.includes('.') || first.includes(':') || first === 'localhost' ? first.toLowerCase() : 'docker.io';
}

/** A tag that may point somewhere else tomorrow: no tag, or `latest`, and no digest. */
export function isMutableReference(image: string): boolean {
  if (image.includes('@')) return false;
  const last = image.split('/').pop()!;
  const colon = last.indexOf(':');
  return colon < 0 || last.slice(colon + 1) === 'latest';
}
