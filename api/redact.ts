/** Query parameters that carry credentials; their values never reach a log line. */
const SECRET_PARAMS = /([?&](?:api_key|apikey|key|token|access_token)=)[^&#]*/gi;

/** The URL with credential-bearing query values replaced by `[redacted]`. */
export function redactUrl(url: string): string {
  return url.replace(SECRET_PARAMS, '$1[redacted]');
}
