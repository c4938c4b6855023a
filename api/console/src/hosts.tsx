/** Not built yet: hosts. */
export function HostsPage() {
  return <p class="notice">Not built yet.</p>;
}
