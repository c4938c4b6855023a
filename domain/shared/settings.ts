/**
 * The settings the domain, the activities and the API run with: parsed once from the environment
 * by infra/config.ts (the one schema of every variable) and handed down in the DomainContext. No
 * module reads process.env for itself.
 */
import type { JobSettings } from '../jobs/settings.ts';
import type { LbHealthSettings } from '../load-balancing/health.ts';
import type { OrchestrationSettings } from './orchestration-settings.ts';
import type { SurfaceLimits } from '../rate-limits/rate-limits.ts';
import type { WebhookAllowList } from '../jobs/webhook-targets.ts';
import type { OutputSettings } from '../public-models/outputs.ts';
import type { MetricsSettings } from '../metrics/rollup.ts';

export interface PlatformSettings {
  /**
   * What worker containers may reach (GANTRY_WORKER_EGRESS): `private` networks and the internet, or
   * `public` addresses only (and the API's). Link-local (cloud metadata) is refused under both.
   */
  workerEgress: 'private' | 'public';
  /**
   * Docker hosts whose daemon does not keep tenants apart (no iptables rules, or its userland proxy
   * on: activities/host-probe.ts, DockerWalls) are used all the same (GANTRY_ALLOW_UNWALLED_DOCKER).
   * Off by default: such a host stays PENDING, its status saying why.
   */
  allowUnwalledDocker: boolean;
  /** Wildcard DNS domain of load-balancing endpoints (GANTRY_LB_DOMAIN), normalized; undefined: path-based URLs. */
  lbDomain: string | undefined;
  /** The proxy's health probes of load-balancing workers (GANTRY_LB_HEALTH). */
  lbHealth: LbHealthSettings;
  /** Private addresses and names job webhooks may reach (GANTRY_WEBHOOK_ALLOW). */
  webhookAllow: WebhookAllowList;
  /** Price file merged over the built-in list prices (GANTRY_PRICES_FILE); re-read when it changes. */
  pricesFile: string | undefined;
  /** Job API timings and limits (GANTRY_JOB_*, GANTRY_WORKER_PING_INTERVAL_MS, GANTRY_MAX_QUEUED_JOBS). */
  jobs: JobSettings;
  /** Request limits of every surface (GANTRY_*RATE_LIMITS, GANTRY_AUTH_FAILURES_PER_MINUTE). */
  limits: SurfaceLimits;
  /** Orchestration timings (GANTRY_ORCHESTRATION). */
  orchestration: OrchestrationSettings;
  /**
   * On how many hosts a new release's image is pulled ahead of its first worker (GANTRY_PREPULL_HOSTS,
   * default 2), the best-ranked for placement first; 0 pulls nothing ahead (activities/image-prepull.ts).
   */
  prepullHosts: number;
  /** Apps: the runtime image of deployed Python code and where hosts cache artifacts (GANTRY_RUNTIME_*, GANTRY_ARTIFACT_CACHE_DIR). */
  apps: AppSettings;
  /** Public models' output files: URL lifetime and purge interval (GANTRY_OUTPUT_URL_TTL_MS, GANTRY_OUTPUT_PURGE_INTERVAL_MS). */
  outputs: OutputSettings;
  /** Endpoint metrics: how often the rollup schedule runs (GANTRY_METRICS_ROLLUP_INTERVAL_MS). */
  metrics: MetricsSettings;
  /** Error answers may carry stack traces: only NODE_ENV=development, a developer's own machine. */
  stackTraces: boolean;
}

export interface AppSettings {
  /** A runtime image to pull instead of building one (`{python}` is replaced by 3.10 .. 3.13); undefined: hosts build it. */
  runtimeImage: string | undefined;
  /** What hosts build the runtime image on (`{python}` replaced). */
  runtimeBaseImage: string;
  /** Digest of the runtime's build context and base: part of the built image's name. */
  runtimeDigest: string;
  /** GPU resources' runtime: the packages GPU functions may import without shipping them. */
  gpuRuntime: {
    /** An image to pull instead of building one ({python} replaced). */
    image: string | undefined;
    baseImage: string;
    /** pip requirements added to the base (those it can import already are skipped). */
    packages: string[];
    digest: string;
  };
  /** The runtime's build context (sdk/python: the Containerfile and the Python package). */
  runtimeContextDir: string;
  /**
   * The Debian mirror hosts build Python base images from (GANTRY_DEBIAN_MIRROR) when the default
   * base cannot be pulled (hostctl/python-base.ts); undefined: the one each host's apt uses.
   */
  debianMirror: string | undefined;
  /** Host directory where workers keep downloaded artifacts, one subdirectory per account. */
  artifactCacheDir: string;
  /**
   * The runtime that endpoints of the hosted service's `flash` tool run in place of its images
   * (`runpod/flash*:py3.X-...`, from a registry hosts may not reach): flash's package and the
   * `runpod` worker SDK on a Python of the tag's version, running gantry.flash (sdk/python).
   */
  flashRuntime: {
    /** Images to pull instead of building them ({python} replaced); undefined: hosts build them. */
    image: string | undefined;
    gpuImage: string | undefined;
    /** What hosts build the CPU one on (GANTRY_FLASH_RUNTIME_BASE_IMAGE) and the GPU one on (the GPU runtime's base). */
    baseImage: string;
    gpuBaseImage: string;
    /** pip requirements added to the base (those it can import already are skipped); the GPU one adds the GPU runtime's too. */
    packages: string[];
    gpuPackages: string[];
    digest: string;
    gpuDigest: string;
    /** The build context (sdk/python, as the other runtimes': the Containerfile and the gantry package). */
    contextDir: string;
  };
}
