import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ApiError, type PlatformClient } from '../../api.ts';
import { buildArtifact } from '../../artifact.ts';
import { snapshot, sourceTarball } from './source.ts';
import {
  configHash,
  depsHash,
  LIVE_ENVIRONMENT,
  readState,
  stateDir,
  writeState,
  type LiveBuild,
  type LiveResource,
  type LiveState,
} from './state.ts';
import { CliError, describeError } from '../../errors.ts';
import { note } from '../../output.ts';
import type { Resource } from '../../scan.ts';

/** Spec "Limits": auto-provision deploys at most 3 resources at once. */
export const PROVISION_CONCURRENCY = 3;

/** At most `limit` callers inside `run` at once; the others wait their turn in order. */
export class Semaphore {
  private active = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(private readonly limit: number) {}

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.active++;
    try {
      return await fn();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }
}

export interface LiveOptions {
  client: PlatformClient;
  projectDir: string;
  app: string;
  python: string;
  /** `major.minor` of the local interpreter: the build falls back on it, so it is part of depsHash. */
  interpreter: string;
  /** GANTRY_DEV_TRACE: timestamped start and end of every provisioning, for tests that count them. */
  trace: boolean;
}

export interface ProvisionResult {
  entry: LiveResource;
  created: boolean;
}

const endpointName = (resource: string): string => `live-${resource}`;
const seconds = (since: number): string => `${((performance.now() - since) / 1000).toFixed(1)} s`;

/**
 * The live endpoints of one project (docs/dev-loop.md): the state in .gantry/live.json, the live
 * build, provisioning one resource at a time (concurrent requests for one resource share it, at
 * most PROVISION_CONCURRENCY at once) and source uploads. Everything that changes the state goes
 * through here, so the file always says what exists.
 */
export class LiveEndpoints {
  private resources = new Map<string, Resource>();
  private currentDepsHash = '';
  private environmentReady?: Promise<void>;
  private building?: Promise<LiveBuild>;
  private readonly inFlight = new Map<string, Promise<ProvisionResult>>();
  private readonly slots = new Semaphore(PROVISION_CONCURRENCY);
  /** Source uploads one after another, so versions follow the order of the edits. */
  private sourceQueue: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly opts: LiveOptions,
    readonly state: LiveState,
  ) {}

  /**
   * The saved state, checked against the platform: endpoints that are gone (undeployed) are
   * forgotten, so their next call makes them again; no environment at all starts over.
   */
  static async open(opts: LiveOptions, resources: Resource[]): Promise<LiveEndpoints> {
    const state = readState(opts.projectDir, opts.app);
    const live = new LiveEndpoints(opts, state);
    live.setResources(resources);
    let endpoints: Set<string> | undefined;
    try {
      const env = await opts.client.getEnvironment(opts.app, LIVE_ENVIRONMENT);
      endpoints = new Set(env.endpoints.map((e) => e.id));
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
    }
    if (!endpoints) {
      Object.assign(state, { build: null, resources: {} });
      delete state.source;
    } else {
      for (const [name, entry] of Object.entries(state.resources)) {
        if (endpoints.has(entry.endpointId)) continue;
        note(`${endpointName(name)} is gone from the platform; its next call makes it again`);
        delete state.resources[name];
      }
    }
    live.save();
    return live;
  }

  get app(): string {
    return this.opts.app;
  }

  /** After a scan: the resources calls are served for, and the hash their dependencies make. */
  setResources(resources: Resource[]): void {
    this.resources = new Map(resources.map((r) => [r.name, r]));
    this.currentDepsHash = depsHash(this.opts.projectDir, resources, this.opts.interpreter);
  }

  get depsHash(): string {
    return this.currentDepsHash;
  }

  /** The endpoint for a resource when it exists and matches the code's configuration. */
  current(name: string): LiveResource | undefined {
    const r = this.resources.get(name);
    const entry = this.state.resources[name];
    return r && entry && entry.configHash === configHash(r) ? entry : undefined;
  }

  /** Provisioned resources still in the code whose configuration changed since. */
  outdated(): string[] {
    return Object.keys(this.state.resources).filter((name) => this.resources.has(name) && !this.current(name));
  }

  /** Provisioned resources still in the code. */
  provisioned(): string[] {
    return Object.keys(this.state.resources).filter((name) => this.resources.has(name));
  }

  save(): void {
    writeState(this.opts.projectDir, this.state);
  }

  /** The resource's live endpoint for a call, made (or updated) first when it does not match the code; the call waits. */
  async endpointFor(name: string): Promise<LiveResource> {
    const now = this.current(name);
    if (now && !this.inFlight.has(name)) return now;
    const why =
      name in this.state.resources
        ? `resource ${name} configuration changed (the call waits)`
        : `First call to ${name} (the call waits; usually 30-60 s)`;
    return (await this.provision(name, why)).entry;
  }

  /** After a call found the endpoint gone (undeployed while dev runs): forget it so the next call makes it again. */
  async confirmGone(name: string, endpointId: string): Promise<boolean> {
    try {
      const env = await this.opts.client.getEnvironment(this.opts.app, LIVE_ENVIRONMENT);
      if (env.endpoints.some((e) => e.id === endpointId)) return false;
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
      // The whole environment went (app or environment deleted): its builds and versions with it.
      this.environmentReady = undefined;
      Object.assign(this.state, { build: null, resources: {} });
      delete this.state.source;
      this.save();
      return true;
    }
    if (this.state.resources[name]?.endpointId === endpointId) {
      delete this.state.resources[name];
      this.save();
    }
    return true;
  }

  /**
   * Creates or updates one resource's endpoint; a provisioning already under way for it is
   * joined rather than repeated.
   */
  provision(name: string, why: string): Promise<ProvisionResult> {
    const running = this.inFlight.get(name);
    if (running) return running;
    const job = this.provisionNow(name, why).finally(() => this.inFlight.delete(name));
    this.inFlight.set(name, job);
    return job;
  }

  private async provisionNow(name: string, why: string): Promise<ProvisionResult> {
    if (!this.resources.has(name)) throw new CliError(`There is no resource ${name} in the code any more.`);
    const started = performance.now();
    const existed = name in this.state.resources;
    note(`${why}: ${existed ? 'updating' : 'creating'} the live endpoint ${endpointName(name)}...`);
    let build = await this.liveBuild([name]);
    let answer: Awaited<ReturnType<PlatformClient['provisionResource']>>;
    try {
      answer = await this.put(name, build);
    } catch (err) {
      // The app was deleted and made again since the build was recorded: its id means nothing now.
      if (!(err instanceof ApiError && err.status === 422 && /buildId/.test(err.message))) throw err;
      this.state.build = null;
      build = await this.liveBuild([name]);
      answer = await this.put(name, build);
    }
    const { endpoint, created } = answer;
    const entry: LiveResource = {
      endpointId: endpoint.id,
      url: endpoint.url,
      kind: endpoint.kind,
      configHash: build.resources?.[name] ?? '',
      buildId: build.id,
    };
    this.state.resources[name] = entry;
    this.save();
    note(`${endpointName(name)} ${created ? 'created' : 'updated'} in ${seconds(started)} (endpoint ${endpoint.id})`);
    const up = await this.syncSource({ provisioned: true });
    if (up)
      note(`source uploaded as version ${up.version}, so ${endpointName(name)} runs the current files like the others`);
    return { entry, created };
  }

  private put(name: string, build: LiveBuild): ReturnType<PlatformClient['provisionResource']> {
    return this.slots.run(async () => {
      this.trace('provision-start', name);
      try {
        return await this.opts.client.provisionResource(this.opts.app, LIVE_ENVIRONMENT, name, build.id);
      } finally {
        this.trace('provision-end', name);
      }
    });
  }

  private trace(event: string, name: string): void {
    if (this.opts.trace) process.stderr.write(`[trace] ${event} ${name} ${Date.now()}\n`);
  }

  /** Whether a build can make these resources' endpoints as the code declares them now. */
  private serves(build: LiveBuild | null, names: string[]): build is LiveBuild {
    if (!build || build.depsHash !== this.currentDepsHash) return false;
    return names.every((n) => {
      const r = this.resources.get(n);
      return r !== undefined && build.resources?.[n] === configHash(r);
    });
  }

  /**
   * A READY build whose manifest has these resources as the code declares them: the last one when
   * it does, else a new one (the same artifact as `gantry build`). Concurrent callers share one
   * build; a build that was already under way before the code changed is waited for and then
   * judged like any other.
   */
  async liveBuild(names: string[]): Promise<LiveBuild> {
    for (let attempt = 0; attempt < 3; attempt++) {
      if (this.serves(this.state.build, names)) return this.state.build;
      this.building ??= this.makeBuild().finally(() => (this.building = undefined));
      await this.building;
    }
    if (this.serves(this.state.build, names)) return this.state.build;
    throw new CliError('The project kept changing while its live build was made; save once more to try again.');
  }

  private async environment(): Promise<void> {
    this.environmentReady ??= (async () => {
      const { client, app } = this.opts;
      try {
        await client.getEnvironment(app, LIVE_ENVIRONMENT);
        return;
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 404)) throw err;
      }
      try {
        await client.getApp(app);
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 404)) throw err;
        await client.createApp(app, LIVE_ENVIRONMENT);
        note(`Created the app ${app} with the environment ${LIVE_ENVIRONMENT}`);
        return;
      }
      await client.createEnvironment(app, LIVE_ENVIRONMENT);
      note(`Created the environment ${LIVE_ENVIRONMENT} in the app ${app}`);
    })().catch((err: unknown) => {
      this.environmentReady = undefined;
      throw err;
    });
    return this.environmentReady;
  }

  private async makeBuild(): Promise<LiveBuild> {
    const { client, app, projectDir } = this.opts;
    await this.environment();
    const dir = stateDir(projectDir);
    const depsDir = path.join(dir, 'deps');
    const depsMarker = path.join(dir, 'deps.hash');
    const wanted = this.currentDepsHash;
    // deps/ is reused only when the marker says it was installed for exactly these inputs.
    const reuse = existsSync(depsMarker) && readFileSync(depsMarker, 'utf8').trim() === wanted;
    if (!reuse) rmSync(depsMarker, { force: true });
    const output = path.join(dir, 'live-artifact.tar.gz');
    const built = await buildArtifact({
      projectDir,
      output,
      deps: true,
      exclude: [],
      depsCache: { dir: depsDir, reuse },
    });
    try {
      if (!reuse) writeFileSync(depsMarker, `${wanted}\n`);
      const prepared = await client.prepareUpload(app, {
        sha256: built.sha256,
        size: built.size,
        manifest: built.manifest,
      });
      if (prepared.build.status !== 'READY') {
        await client.upload(prepared.upload, built.path);
        await client.finalizeUpload(app, prepared.build.id);
      }
      const build: LiveBuild = {
        id: prepared.build.id,
        depsHash: wanted,
        sha256: built.sha256,
        fingerprint: built.manifest.fingerprint,
        resources: Object.fromEntries(built.manifest.resources.map((r) => [r.name, configHash(r)])),
      };
      this.state.build = build;
      this.save();
      note(`Live build ${build.id} uploaded${reuse ? ' (dependencies reused)' : ''}`);
      return build;
    } finally {
      rmSync(built.path, { force: true });
    }
  }

  /**
   * Uploads the source files as the environment's next version when a live endpoint may not run
   * them. An endpoint runs its build's src/ until a version newer than the one it was provisioned
   * at exists (GANTRY_SOURCE_VERSION): so after a provisioning from a build whose files differ from
   * the last upload, the files go up again even if unchanged, and every endpoint then runs the
   * same, current, code. `files`: the source files when the caller has just listed them. Returns
   * the new version, or undefined when nothing was uploaded.
   */
  syncSource(
    opts: { provisioned?: boolean; files?: string[] } = {},
  ): Promise<{ version: number; ms: number } | undefined> {
    const next = this.sourceQueue.then(() => this.syncSourceNow(opts));
    this.sourceQueue = next.catch(() => undefined);
    return next;
  }

  /** The fingerprint every live endpoint runs, when that is known to be one and the same. */
  private runningFingerprint(): string | undefined {
    if (this.state.source) {
      if (!this.provisionedAfterUpload) return this.state.source.fingerprint;
      // Provisioned since the upload: those run their build's files; the rest the upload's.
      return this.builtFingerprints().every((f) => f === this.state.source!.fingerprint)
        ? this.state.source.fingerprint
        : undefined;
    }
    const built = new Set(this.builtFingerprints());
    return built.size === 1 ? [...built][0] : undefined;
  }

  /** The src/ fingerprint of each endpoint's build, where that build is the one on record (else undefined). */
  private builtFingerprints(): Array<string | undefined> {
    const build = this.state.build;
    return Object.values(this.state.resources).map((r) =>
      build && r.buildId === build.id ? build.fingerprint : undefined,
    );
  }

  private provisionedAfterUpload = false;

  private async syncSourceNow(opts: {
    provisioned?: boolean;
    files?: string[];
  }): Promise<{ version: number; ms: number } | undefined> {
    if (opts.provisioned) this.provisionedAfterUpload = true;
    // Nothing runs yet: the first provisioning's build carries the files.
    if (!this.state.build || Object.keys(this.state.resources).length === 0) return undefined;
    const started = performance.now();
    const now = await snapshot(this.opts.python, this.opts.projectDir, opts.files);
    if (this.runningFingerprint() === now.fingerprint) return undefined;
    const tarball = await sourceTarball(this.opts.projectDir, now.files);
    const uploaded = await this.opts.client.uploadSource(this.opts.app, LIVE_ENVIRONMENT, tarball);
    this.state.source = { version: uploaded.version, fingerprint: now.fingerprint };
    this.provisionedAfterUpload = false;
    this.save();
    return { version: uploaded.version, ms: Math.round(performance.now() - started) };
  }

  /** Provisions these resources, PROVISION_CONCURRENCY at a time; failures are reported, not thrown. */
  async provisionAll(names: string[], why: string): Promise<{ created: number; updated: number; failed: string[] }> {
    const outcome = { created: 0, updated: 0, failed: [] as string[] };
    // One build for all of them first, so the provisionings do not each find the build missing.
    if (names.length > 0) await this.liveBuild(names);
    await Promise.all(
      names.map(async (name) => {
        try {
          const r = await this.provision(name, why);
          if (r.created) outcome.created++;
          else outcome.updated++;
        } catch (err) {
          outcome.failed.push(name);
          note(`${endpointName(name)} could not be provisioned: ${describeError(err)}`);
        }
      }),
    );
    return outcome;
  }
}
