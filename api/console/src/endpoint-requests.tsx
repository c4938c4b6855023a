/** Not built yet: the requests of an endpoint. */
export function RequestsTab({ id }: { id: string }) {
  return <p class="notice">Not built yet ({id}).</p>;
}
