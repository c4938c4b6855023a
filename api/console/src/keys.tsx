/** Not built yet: keys. */
export function KeysPage() {
  return <p class="notice">Not built yet.</p>;
}
