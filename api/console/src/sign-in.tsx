import { useState } from 'preact/hooks';
import { ApiError, get, storeKey } from './api.ts';

/** The sign-in form: the key is checked with one call before it is kept (session storage only). */
export function SignIn({ message, signedIn }: { message: string; signedIn: (key: string) => void }) {
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const shown = error || message;
  return (
    <section class="card" aria-labelledby="sign-in-heading">
      <h1 id="sign-in-heading">Sign in</h1>
      <p>The console calls this server's REST API with your API key. It is kept in this tab's session storage only.</p>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          const input = (e.currentTarget as HTMLFormElement).elements.namedItem('key') as HTMLInputElement;
          const key = input.value.trim();
          if (!key) return setError('Enter an API key.');
          setBusy(true);
          setError('');
          try {
            await get('/v2/serverless', key);
            storeKey(key);
            signedIn(key);
          } catch (err) {
            setError(err instanceof ApiError ? err.message : 'The API could not be reached.');
          } finally {
            setBusy(false);
          }
        }}
      >
        <label for="key-input">API key</label>
        <input
          id="key-input"
          name="key"
          type="password"
          autocomplete="off"
          spellcheck={false}
          required
          aria-describedby="sign-in-error"
        />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
        <p id="sign-in-error" class="error" role="alert">
          {shown}
        </p>
      </form>
    </section>
  );
}
