/** Not built yet: usage. */
export function UsagePage() {
  return <p class="notice">Not built yet.</p>;
}
