// The API key the playground's pages call with (served as /playground/assets/key.js, see
// api/playground/routes.ts): kept in the tab's session storage only, shared by the tab's pages.
/* global document, sessionStorage */

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

/**
 * Wires the page's key form (#key-form, #key-input, #key-error): a key given is kept for the tab
 * and `then` runs; an empty one or a browser that refuses storage is said under the field.
 */
export function onKeyGiven(then) {
  const input = document.getElementById('key-input');
  const error = document.getElementById('key-error');
  document.getElementById('key-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (!key) {
      error.textContent = 'Enter your API key.';
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    try {
      storeKey(key);
    } catch {
      error.textContent = 'This browser refused to keep the key for the tab (session storage is off).';
      return;
    }
    input.value = '';
    input.removeAttribute('aria-invalid');
    error.textContent = '';
    then();
  });
}
