/**
 * Query parameters that carry credentials; their values never reach a log line or an answer. `sig`
 * is the signature of Gantry's signed URLs (artifacts, sources): within its hour it is a key to the
 * bytes. Names are compared as the query parser reads them (percent-decoded, `+` as a space), so a
 * key that authenticates as `?api%5Fkey=` is redacted as surely as `?api_key=`.
 */
const SECRET_PARAMS = new Set(['api_key', 'apikey', 'key', 'token', 'access_token', 'sig']);

function decodedName(raw: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' ')).toLowerCase();
  } catch {
    // Not validly encoded: the parser refuses the request; redact it all the same if it looks close.
    return raw.toLowerCase();
  }
}

function redactQuery(query: string): string {
  return query
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq === -1 ? pair : pair.slice(0, eq);
      return SECRET_PARAMS.has(decodedName(name)) ? `${name}=[redacted]` : pair;
    })
    .join('&');
}

/**
 * The URL with credential-bearing query values replaced by `[redacted]`, and anything after a `;`
 * in the path (matrix parameters, which no route reads: `/graphql;api_key=...`) dropped the same way.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  const rawPath = q === -1 ? url : url.slice(0, q);
  const semi = rawPath.indexOf(';');
  const path = semi === -1 ? rawPath : `${rawPath.slice(0, semi)};[redacted]`;
  return q === -1 ? path : `${path}?${redactQuery(url.slice(q + 1))}`;
}
