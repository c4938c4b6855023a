import { createContext } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { get, onSignOut, signOut, storedKey, type Answer } from './api.ts';
import { NewEndpointPage } from './endpoint-new.tsx';
import { ENDPOINT_TABS, EndpointPage, type EndpointTab } from './endpoint.tsx';
import { EndpointsPage } from './endpoints.tsx';
import { HostsPage } from './hosts.tsx';
import { KeysPage } from './keys.tsx';
import { PublicModelsPage } from './public-models.tsx';
import { RegistriesPage } from './registries.tsx';
import { SignIn } from './sign-in.tsx';
import { TemplatesPage } from './templates.tsx';
import { UsagePage } from './usage.tsx';
import { VolumesPage } from './volumes.tsx';

/** GET /v2/keys/self: the key this console is signed in with. */
export type CallingKey = Answer<'/v2/keys/self', 'get'>;

/** The signed-in key as the last check saw it; null until the first answer. */
export const CallingKeyContext = createContext<CallingKey | null>(null);

/**
 * How often the signed-in key is checked while the tab is visible: a revoked or expired key answers
 * 401, which signs out (api.ts), so an idle console is signed out within about this long.
 */
const KEY_CHECK_MS = 1000;

/**
 * Checks the key every KEY_CHECK_MS while `key` is set and the tab is visible (at once when it is
 * shown again), one call at a time; answers what the last check saw. Other failures (429, the
 * network) keep the last answer: only a 401 means the key is gone.
 */
function useCallingKey(key: string | null): CallingKey | null {
  const [self, setSelf] = useState<CallingKey | null>(null);
  useEffect(() => {
    setSelf(null);
    if (!key) return;
    let live = true;
    let inFlight = false;
    const check = () => {
      if (inFlight || document.visibilityState !== 'visible') return;
      inFlight = true;
      get<CallingKey>('/v2/keys/self', key)
        .then((k) => live && setSelf(k))
        .catch(() => {})
        .finally(() => (inFlight = false));
    };
    check();
    const timer = setInterval(check, KEY_CHECK_MS);
    document.addEventListener('visibilitychange', check);
    return () => {
      live = false;
      clearInterval(timer);
      document.removeEventListener('visibilitychange', check);
    };
  }, [key]);
  return self;
}

type Route =
  | { page: 'endpoints' }
  | { page: 'new-endpoint' }
  | { page: 'endpoint'; id: string; tab: EndpointTab }
  | { page: Section }
  | { page: 'missing' };

/** The account-wide pages, in the top bar's order after Endpoints. */
const SECTIONS = {
  hosts: 'Hosts',
  keys: 'Keys',
  registries: 'Registries',
  templates: 'Templates',
  volumes: 'Volumes',
  'public-models': 'Public models',
  usage: 'Usage',
} as const;
type Section = keyof typeof SECTIONS;

/** Client-side routes under /console (the server answers index.html for any of them). */
function route(pathname: string): Route {
  const rest = pathname.replace(/^\/console\/?/, '').replace(/\/$/, '');
  if (rest === '' || rest === 'endpoints') return { page: 'endpoints' };
  if (rest === 'endpoints/new') return { page: 'new-endpoint' };
  const m = /^endpoints\/([^/]+)(?:\/([a-z]+))?$/.exec(rest);
  if (m) {
    const tab = (m[2] ?? 'overview') as EndpointTab;
    if (ENDPOINT_TABS.includes(tab)) return { page: 'endpoint', id: decodeURIComponent(m[1]!), tab };
  }
  if (rest in SECTIONS) return { page: rest as Section };
  return { page: 'missing' };
}

function Page({ r }: { r: Route }) {
  switch (r.page) {
    case 'endpoints':
      return <EndpointsPage />;
    case 'new-endpoint':
      return <NewEndpointPage />;
    case 'endpoint':
      return <EndpointPage id={r.id} tab={r.tab} />;
    case 'hosts':
      return <HostsPage />;
    case 'keys':
      return <KeysPage />;
    case 'registries':
      return <RegistriesPage />;
    case 'templates':
      return <TemplatesPage />;
    case 'volumes':
      return <VolumesPage />;
    case 'public-models':
      return <PublicModelsPage />;
    case 'usage':
      return <UsagePage />;
    default:
      return (
        <p class="notice">
          No such page. <Link href="/console">Back to the endpoints</Link>
        </p>
      );
  }
}

/** Moves to a console address without reloading (links call it on a plain click). */
export function navigate(href: string): void {
  history.pushState(null, '', href);
  dispatchEvent(new PopStateEvent('popstate'));
}

export function Link({
  href,
  children,
  current = false,
}: {
  href: string;
  children: preact.ComponentChildren;
  current?: boolean;
}) {
  return (
    <a
      href={href}
      aria-current={current ? 'page' : undefined}
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
  const self = useCallingKey(key);
  const r = route(path);
  // Hosts are the platform admin's: other keys are not shown the link (the page says why).
  const sections = (Object.keys(SECTIONS) as Section[]).filter((s) => s !== 'hosts' || self?.admin);
  return (
    <>
      <header class="topbar">
        <Link href="/console">Gantry console</Link>
        {key && (
          <nav aria-label="Console">
            <Link
              href="/console/endpoints"
              current={r.page === 'endpoints' || r.page === 'endpoint' || r.page === 'new-endpoint'}
            >
              Endpoints
            </Link>
            {sections.map((s) => (
              <Link key={s} href={`/console/${s}`} current={r.page === s}>
                {SECTIONS[s]}
              </Link>
            ))}
          </nav>
        )}
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
        ) : (
          <CallingKeyContext.Provider value={self}>
            <Page r={r} />
          </CallingKeyContext.Provider>
        )}
      </main>
    </>
  );
}
