/** Not built yet: volumes. */
export function VolumesPage() {
  return <p class="notice">Not built yet.</p>;
}
