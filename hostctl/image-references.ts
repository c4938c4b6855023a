/** What container runtimes make of an image reference: where it is pulled from, and whether it is the host's own. */

/** The registry host of an image reference (`docker.io` for bare names such as `alpine:3.20`); host names are case-insensitive. */
export function registryOf(image: string): string {
  const first = image.split('/')[0]!;
  if (!image.includes('/')) return 'docker.io';
  return first.includes('.') || first.includes(':') || first === 'localhost' ? first.toLowerCase() : 'docker.io';
}

/** `localhost/...`: an image built or loaded on the host itself, which no registry serves. */
export function isHostLocalImage(image: string): boolean {
  return image.includes('/') && registryOf(image) === 'localhost';
}
