/** Not built yet: the logs of an endpoint. */
export function LogsTab({ id }: { id: string }) {
  return <p class="notice">Not built yet ({id}).</p>;
}
