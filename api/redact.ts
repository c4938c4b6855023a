/**
 * Query parameters that carry credentials; their values never reach a log line or an answer. `sig`
 * is the signature of Gantry's signed URLs (artifacts, sources): within its hour it is a key to the
 * bytes. Names are compared as the query parser reads them (percent-decoded, `+` as a space), so a
 * key that authenticates as `?api%5Fkey=` is redacted as surely as `?api_key=`; and up to the first
 * character no such name has, so the lookalikes that do not authenticate (`?api_key[]=`,
 * `?api_key.x=`, `?api_key%00=`) are redacted too. `;` separates parameters as `&` does here
 * (`?foo=1;api_key=`): the parser keeps it inside the value, a reader of the log would not.
 */
const SECRET_PARAMS = new Set(['api_key', 'apikey', 'key', 'token', 'access_token', 'sig']);

/**
 * What Gantry mints as a key: `gntr_` and then letters, digits and `_` (API keys: domain/shared/ids.ts;
 * worker credentials: `gntr_wk_...`), plus the `-` and `.` a configured GANTRY_ADMIN_API_KEY may
 * have. Matched in the raw URL with any character percent-encoded (`gntr%5F...`) and in any case,
 * so a key is redacted by its shape wherever it is: a path segment, a value under any name, a
 * fragment.
 */
const KEY_PREFIX = [...'gntr_'].map((c) => `(?:${c}|%${c.charCodeAt(0).toString(16).padStart(2, '0')})`).join('');
const KEY_SHAPED = new RegExp(`${KEY_PREFIX}(?:[A-Za-z0-9_.-]|%[0-9A-Fa-f]{2})+`, 'gi');

/** `text` with every key-shaped run of characters replaced by `[redacted]`. */
export function redactKeys(text: string): string {
  return text.replace(KEY_SHAPED, '[redacted]');
}

function decodedName(raw: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' ')).toLowerCase();
  } catch {
    // Not validly encoded: the parser refuses the request; redact it all the same if it looks close.
    return raw.toLowerCase();
  }
}

/** The name as far as it could be a secret parameter's: `api_key[]`, `api_key.x`, `api_key\0` → `api_key`. */
const isSecretName = (raw: string): boolean => SECRET_PARAMS.has(decodedName(raw).replace(/[^a-z0-9_].*$/s, ''));

function redactQuery(query: string): string {
  return query
    .split(/([&;])/)
    .map((pair, i) => {
      if (i % 2 === 1) return pair; // a separator
      const eq = pair.indexOf('=');
      const name = eq === -1 ? pair : pair.slice(0, eq);
      return isSecretName(name) ? `${name}=[redacted]` : pair;
    })
    .join('');
}

/**
 * The URL as it may be logged or echoed: every key-shaped value redacted wherever it is, the values
 * of credential-bearing query parameters replaced by `[redacted]`, and anything after a `;` in the
 * path (matrix parameters, which no route reads: `/graphql;api_key=...`) dropped the same way.
 */
export function redactUrl(url: string): string {
  const redacted = redactKeys(url);
  const q = redacted.indexOf('?');
  const rawPath = q === -1 ? redacted : redacted.slice(0, q);
  const semi = rawPath.indexOf(';');
  const path = semi === -1 ? rawPath : `${rawPath.slice(0, semi)};[redacted]`;
  return q === -1 ? path : `${path}?${redactQuery(redacted.slice(q + 1))}`;
}
