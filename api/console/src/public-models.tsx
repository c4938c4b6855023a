/** Not built yet: public-models. */
export function PublicModelsPage() {
  return <p class="notice">Not built yet.</p>;
}
