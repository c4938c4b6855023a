import { useEffect, useState } from 'preact/hooks';
import { onSignOut, signOut, storedKey } from './api.ts';
import { EndpointPage } from './endpoint.tsx';
import { EndpointsPage } from './endpoints.tsx';
import { SignIn } from './sign-in.tsx';

/** Client-side routes under /console (the server answers index.html for any of them). */
function route(pathname: string): { page: 'endpoints' } | { page: 'endpoint'; id: string } | { page: 'missing' } {
  const rest = pathname.replace(/^\/console\/?/, '').replace(/\/$/, '');
  if (rest === '' || rest === 'endpoints') return { page: 'endpoints' };
  const m = /^endpoints\/([^/]+)$/.exec(rest);
  if (m) return { page: 'endpoint', id: decodeURIComponent(m[1]!) };
  return { page: 'missing' };
}

/** Moves to a console address without reloading (links call it on a plain click). */
export function navigate(href: string): void {
  history.pushState(null, '', href);
  dispatchEvent(new PopStateEvent('popstate'));
}

export function Link({ href, children }: { href: string; children: preact.ComponentChildren }) {
  return (
    <a
      href={href}
      onClick={(e) => {
        if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(href);
      }}
    >
      {children}
    </a>
  );
}

export function App() {
  const [key, setKey] = useState(storedKey());
  const [message, setMessage] = useState('');
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    onSignOut((m) => {
      setKey(null);
      setMessage(m);
    });
    const moved = () => setPath(location.pathname);
    addEventListener('popstate', moved);
    return () => removeEventListener('popstate', moved);
  }, []);
  const r = route(path);
  return (
    <>
      <header class="topbar">
        <Link href="/console">Gantry console</Link>
        {key && (
          <button type="button" class="quiet" onClick={() => signOut('Signed out.')}>
            Sign out
          </button>
        )}
      </header>
      <main id="main">
        {!key ? (
          <SignIn
            message={message}
            signedIn={(k) => {
              setMessage('');
              setKey(k);
            }}
          />
        ) : r.page === 'endpoints' ? (
          <EndpointsPage />
        ) : r.page === 'endpoint' ? (
          <EndpointPage id={r.id} />
        ) : (
          <p class="notice">
            No such page. <Link href="/console">Back to the endpoints</Link>
          </p>
        )}
      </main>
    </>
  );
}
