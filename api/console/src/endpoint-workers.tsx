/** Not built yet: the workers of an endpoint. */
export function WorkersTab({ id }: { id: string }) {
  return <p class="notice">Not built yet ({id}).</p>;
}
