/** Not built yet: registries. */
export function RegistriesPage() {
  return <p class="notice">Not built yet.</p>;
}
