// The API key the playground's pages call with (served as /playground/assets/key.js, see
// api/playground/routes.ts): kept in the tab's session storage only, shared by the tab's pages.
/* global sessionStorage */

const KEY_ITEM = 'gantry.playground.key';

/** The tab's key, or null (none given, or storage refused). */
export function storedKey() {
  try {
    return sessionStorage.getItem(KEY_ITEM);
  } catch {
    return null;
  }
}

/** Keeps `key` for the tab; throws when the browser refuses session storage. */
export function storeKey(key) {
  sessionStorage.setItem(KEY_ITEM, key);
}

export function forgetKey() {
  try {
    sessionStorage.removeItem(KEY_ITEM);
  } catch {
    // Storage refused (privacy mode): there is nothing stored to forget.
  }
}
