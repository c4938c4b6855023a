/** Not built yet: the form of POST /v2/serverless. */
export function NewEndpointPage() {
  return <p class="notice">Not built yet.</p>;
}
