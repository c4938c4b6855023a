/**
 * What the suite builds once per machine, built before the first test starts (from the global
 * setup), one line of progress each: a test's time limit then measures the test, not a first-time
 * debootstrap, pip install or `go install` inside it (on a fresh, busy machine those took longer
 * than a test's whole budget). Each step is the same idempotent, lock-guarded call the tests make,
 * so a later call in a test finds it done in milliseconds; a run of a few files without the global
 * preparation (GANTRY_TEST_PREPARE=0) builds lazily, as before.
 */
import { ensureConsoleBuilt } from '../../api/console/build.ts';
import { loadConfig } from '../../infra/config.ts';
import { DOCKER_PACKAGES } from './docker-test-host.ts';
import { ensureFlashBaseImage } from './flash-base-image.ts';
import { ensurePythonBaseImage } from './python-base-image.ts';
import { ensurePythonClients, FLASH_CLIENT_REQUIREMENTS } from './python-clients.ts';
import { ensureHostPackages, HOST_PACKAGES, prepareTestHostMachine } from './ssh-test-host.ts';
import { ensureTemporalServerBinaries } from './temporal-server.ts';
import { resolveTemporalTestServer } from './temporal-test-server.ts';
import { ensureLbWorkerImage, ensureOrchestrationWorkerImage } from './test-image.ts';
import { ensureImageRegistry } from './image-registry.ts';
import { ensureVersityGw } from './versitygw.ts';

export interface PrerequisiteStep {
  what: string;
  run: () => Promise<unknown>;
}

/** The steps, cheapest first; `scale` adds Temporal's own server (the scale-out scenario's). */
export function machinePrerequisites(options: { scale: boolean; log: (msg: string) => void }): PrerequisiteStep[] {
  const { log } = options;
  const cacheDir = loadConfig().cacheDir;
  const steps: PrerequisiteStep[] = [
    { what: 'the console (Vite build, cached by digest)', run: () => ensureConsoleBuilt(cacheDir, log) },
    {
      what: `Debian packages of the test hosts (${[...HOST_PACKAGES, 'debootstrap', ...DOCKER_PACKAGES].join(', ')})`,
      run: async () => {
        ensureHostPackages([...HOST_PACKAGES, 'debootstrap', 'debian-archive-keyring', ...DOCKER_PACKAGES], log);
        prepareTestHostMachine(log);
      },
    },
    {
      what: 'the test worker images (orchestration and load-balancing workers: node and a fixture)',
      run: async () => [ensureOrchestrationWorkerImage(), ensureLbWorkerImage()],
    },
    {
      what: "Temporal's time-skipping test server (Maven Central)",
      run: async () => resolveTemporalTestServer(cacheDir, log),
    },
    { what: 'versitygw, the S3 server of the blob-store tests (Go module proxy)', run: () => ensureVersityGw({ log }) },
    {
      what: 'the image registry of the private-image tests (Go module proxy)',
      run: () => ensureImageRegistry({ log }),
    },
    { what: 'Python 3.11 base image (debootstrap bookworm)', run: () => ensurePythonBaseImage('3.11', { log }) },
    {
      what: 'Python 3.11 base image with numpy (the GPU runtime of the deploy tests)',
      run: () => ensurePythonBaseImage('3.11', { extraPackages: ['python3-numpy'], log }),
    },
    { what: 'Python 3.13 base image (debootstrap trixie)', run: () => ensurePythonBaseImage('3.13', { log }) },
    { what: "the hosted service's Python clients (PyPI)", run: () => ensurePythonClients({ log }) },
    {
      what: "flash's client set (PyPI)",
      run: () => ensurePythonClients({ requirements: FLASH_CLIENT_REQUIREMENTS, log }),
    },
    { what: "flash's runtime base for Python 3.11", run: () => ensureFlashBaseImage('3.11', log) },
  ];
  if (options.scale)
    steps.push({
      what: "Temporal's own server and SQL tool (Go module proxy)",
      run: () => ensureTemporalServerBinaries({ log }),
    });
  return steps;
}

/** Runs the steps in order, each with a line before and after; the first failure stops the run, named. */
export async function prepareMachine(options: { scale: boolean; log?: (msg: string) => void }): Promise<void> {
  const log = options.log ?? ((msg: string) => console.error(msg));
  const steps = machinePrerequisites({ scale: options.scale, log: (msg) => log(`  ${msg}`) });
  const began = Date.now();
  for (const [i, step] of steps.entries()) {
    const started = Date.now();
    log(`[prepare ${i + 1}/${steps.length}] ${step.what}...`);
    try {
      await step.run();
    } catch (err) {
      throw new Error(`preparing this machine for the suite failed at: ${step.what}`, { cause: err });
    }
    log(`[prepare ${i + 1}/${steps.length}] ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
  log(`[prepare] this machine is ready for the suite (${((Date.now() - began) / 1000).toFixed(1)} s)`);
}
