/** Not built yet: templates. */
export function TemplatesPage() {
  return <p class="notice">Not built yet.</p>;
}
