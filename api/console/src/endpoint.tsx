import { get, type Endpoint } from './api.ts';
import { Link } from './app.tsx';
import { LogsTab } from './endpoint-logs.tsx';
import { OverviewTab } from './endpoint-overview.tsx';
import { ReleasesTab } from './endpoint-releases.tsx';
import { RequestsTab } from './endpoint-requests.tsx';
import { SettingsTab } from './endpoint-settings.tsx';
import { WorkersTab } from './endpoint-workers.tsx';
import { usePolled } from './poll.ts';

export const ENDPOINT_TABS = ['overview', 'workers', 'requests', 'releases', 'logs', 'settings'] as const;
export type EndpointTab = (typeof ENDPOINT_TABS)[number];
const TITLES: Record<EndpointTab, string> = {
  overview: 'Overview',
  workers: 'Workers',
  requests: 'Requests',
  releases: 'Releases',
  logs: 'Logs',
  settings: 'Settings',
};

/**
 * The Temporal UI's namespace address, when the server names one (a `<meta>` of index.html): the
 * endpoint's workflows (its lifecycle, rollouts, workers and jobs) are those with its GantryEndpointId.
 */
function temporalUiLink(endpointId: string): string | null {
  const ui = document.querySelector<HTMLMetaElement>('meta[name="gantry-temporal-ui"]')?.content;
  if (!ui || !/^https?:\/\//.test(ui)) return null;
  return `${ui}/workflows?query=${encodeURIComponent(`GantryEndpointId="${endpointId}"`)}`;
}

/** One endpoint (GET /v2/serverless/{id}): its header, a tab bar (each tab its own address) and the tab. */
export function EndpointPage({ id, tab }: { id: string; tab: EndpointTab }) {
  const base = `/console/endpoints/${encodeURIComponent(id)}`;
  const workflows = temporalUiLink(id);
  const {
    data: endpoint,
    error,
    reload,
  } = usePolled(() => get<Endpoint>(`/v2/serverless/${encodeURIComponent(id)}`), [id], 30_000);
  return (
    <section aria-labelledby="endpoint-heading">
      <p>
        <Link href="/console">← Endpoints</Link>
      </p>
      <h1 id="endpoint-heading">{endpoint ? endpoint.name : 'Endpoint'}</h1>
      {endpoint && (
        <p class="meta">
          <code>{endpoint.id}</code> · {endpoint.type} · image <code>{endpoint.image}</code> · workers{' '}
          {endpoint.workers.min}–{endpoint.workers.max}
          {workflows && (
            <>
              {' · '}
              <a href={workflows} target="_blank" rel="noopener noreferrer">
                Workflows in the Temporal UI
              </a>
            </>
          )}
        </p>
      )}
      {error && !endpoint ? (
        <p class="notice error" role="alert">
          {error}
        </p>
      ) : (
        <EndpointTabs id={id} tab={tab} base={base} endpoint={endpoint} reload={reload} />
      )}
    </section>
  );
}

/** The tab bar and the chosen tab (the settings wait for the endpoint's read). */
function EndpointTabs({
  id,
  tab,
  base,
  endpoint,
  reload,
}: {
  id: string;
  tab: EndpointTab;
  base: string;
  endpoint: Endpoint | null;
  reload: () => void;
}) {
  return (
    <>
      <nav class="tabs" aria-label="Endpoint">
        {ENDPOINT_TABS.map((t) => (
          <Link key={t} href={t === 'overview' ? base : `${base}/${t}`} current={t === tab}>
            {TITLES[t]}
          </Link>
        ))}
      </nav>
      <div class="tab" data-tab={tab}>
        {tab === 'overview' ? (
          <OverviewTab id={id} />
        ) : tab === 'workers' ? (
          <WorkersTab id={id} />
        ) : tab === 'requests' ? (
          <RequestsTab id={id} />
        ) : tab === 'releases' ? (
          <ReleasesTab id={id} />
        ) : tab === 'logs' ? (
          <LogsTab id={id} />
        ) : endpoint ? (
          <SettingsTab endpoint={endpoint} saved={reload} />
        ) : (
          <p aria-busy="true">Loading…</p>
        )}
      </div>
    </>
  );
}
