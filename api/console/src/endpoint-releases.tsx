/** Not built yet: the releases of an endpoint. */
export function ReleasesTab({ id }: { id: string }) {
  return <p class="notice">Not built yet ({id}).</p>;
}
