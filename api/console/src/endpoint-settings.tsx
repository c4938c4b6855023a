import type { Endpoint } from './api.ts';

/** Not built yet: an endpoint's settings, edited as PATCH /v2/serverless/{id}. */
export function SettingsTab({ endpoint }: { endpoint: Endpoint; saved: () => void }) {
  return <p class="notice">Not built yet ({endpoint.id}).</p>;
}
