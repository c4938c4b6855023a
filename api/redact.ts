/**
 * Query parameters that carry credentials; their values never reach a log line. `sig` is the
 * signature of Gantry's signed URLs (artifacts, sources): within its hour it is a key to the bytes.
 */
const SECRET_PARAMS = /([?&](?:api_key|apikey|key|token|access_token|sig)=)[^&#]*/gi;

/** The URL with credential-bearing query values replaced by `[redacted]`. */
export function redactUrl(url: string): string {
  return url.replace(SECRET_PARAMS, '$1[redacted]');
}
