/**
 * Temporal's time-skipping test server, for the workflow tests (test/workflows): the server behind
 * the TypeScript SDK's `TestWorkflowEnvironment.createTimeSkipping()`. The SDK downloads a native
 * build of it from GitHub by default, which machines without that access cannot do; the same server
 * is a Java program published on Maven Central (io.temporal:temporal-test-server). This resolves
 * its class path with Maven once per machine, into the per-machine cache next to the Temporal CLI
 * (`~/.cache/gantry`), and writes a two-line wrapper script that the SDK starts as
 * `server: { executable: { type: 'existing-path', path } }`.
 *
 * Needs Java 17+ and Maven (Debian: `openjdk-17-jre-headless`, `maven`) and Maven Central (or the
 * mirror ~/.m2/settings.xml names). The first build fetches about 55 MB and takes 10 to 15 s; later
 * calls only check that the files are there.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { releaseBuildLock, tryBuildLock } from '../../infra/build-lock.ts';

/** The Java SDK release whose test server the workflow tests run on. */
export const TEMPORAL_TEST_SERVER_VERSION = '1.31.0';
/** Pinned so that the resolution is the same on every machine. */
const DEPENDENCY_PLUGIN = 'org.apache.maven.plugins:maven-dependency-plugin:3.8.1:build-classpath';

/** A shell word that stands for `s` exactly. */
const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

function onPath(name: string): string | undefined {
  const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  const found = r.stdout.trim();
  return r.status === 0 && found ? found : undefined;
}

/** The resolved class path, if it and every jar of it are still there. */
function cachedClasspath(classpathFile: string): string | undefined {
  if (!existsSync(classpathFile)) return undefined;
  const classpath = readFileSync(classpathFile, 'utf8').trim();
  const jars = classpath.split(path.delimiter).filter(Boolean);
  return jars.length > 0 && jars.every((jar) => existsSync(jar)) ? classpath : undefined;
}

/**
 * The wrapper script. The JVM flags shorten its start (the SDK gives the server 5 s to answer,
 * which a loaded machine can use up): the client compiler only, and the serial collector.
 */
const wrapperScript = (java: string, classpath: string): string =>
  `#!/bin/sh\nexec ${shellQuote(java)} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -cp ${shellQuote(classpath)} io.temporal.testserver.TestServer "$@"\n`;

/** Writes the wrapper unless it is there already with this content (beside and renamed: a wrapper that exists is complete). */
function writeWrapper(wrapper: string, script: string): string {
  if (existsSync(wrapper) && readFileSync(wrapper, 'utf8') === script) return wrapper;
  const partial = `${wrapper}.${process.pid}.partial`;
  writeFileSync(partial, script);
  chmodSync(partial, 0o755);
  renameSync(partial, wrapper);
  return wrapper;
}

const pom = (version: string): string => `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.gantry</groupId>
  <artifactId>temporal-test-server-classpath</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>io.temporal</groupId>
      <artifactId>temporal-test-server</artifactId>
      <version>${version}</version>
    </dependency>
  </dependencies>
</project>
`;

/**
 * The path of an executable that starts the time-skipping test server with the arguments it is
 * given; builds it into `<cacheDir>/temporal-test-server-<version>/` first when it is missing.
 * Several processes may call this at once: one builds, the others wait for it.
 */
export function resolveTemporalTestServer(cacheDir: string, log: (line: string) => void = console.error): string {
  const dir = path.join(cacheDir, `temporal-test-server-${TEMPORAL_TEST_SERVER_VERSION}`);
  const wrapper = path.join(dir, 'temporal-test-server');
  const classpathFile = path.join(dir, 'classpath.txt');
  const java = onPath('java');
  const ready = cachedClasspath(classpathFile);
  if (ready && java) return writeWrapper(wrapper, wrapperScript(java, ready));

  mkdirSync(dir, { recursive: true });
  // Two processes on one machine never resolve it at once.
  const lock = path.join(dir, '.building');
  while (!tryBuildLock(lock, 10 * 60_000)) {
    spawnSync('sleep', ['1']);
    const built = cachedClasspath(classpathFile);
    if (built && java) return writeWrapper(wrapper, wrapperScript(java, built));
  }
  try {
    const built = cachedClasspath(classpathFile);
    if (built && java) return writeWrapper(wrapper, wrapperScript(java, built));
    const mvn = onPath('mvn');
    if (!java || !mvn) {
      throw new Error(
        `Temporal's time-skipping test server needs Java 17+ and Maven on PATH (missing: ${[java ? '' : 'java', mvn ? '' : 'mvn'].filter(Boolean).join(', ')}); on Debian: apt-get install openjdk-17-jre-headless maven`,
      );
    }
    log(
      `Resolving Temporal's time-skipping test server (io.temporal:temporal-test-server:${TEMPORAL_TEST_SERVER_VERSION}) from Maven Central into ${dir}; this happens once per machine.`,
    );
    const started = Date.now();
    writeFileSync(path.join(dir, 'pom.xml'), pom(TEMPORAL_TEST_SERVER_VERSION));
    const r = spawnSync(
      mvn,
      [
        '-q',
        '-B',
        '-f',
        path.join(dir, 'pom.xml'),
        `-Dmaven.repo.local=${path.join(cacheDir, 'maven-repository')}`,
        DEPENDENCY_PLUGIN,
        `-Dmdep.outputFile=${classpathFile}`,
      ],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
    );
    if (r.status !== 0 || !existsSync(classpathFile)) {
      throw new Error(
        `mvn dependency:build-classpath failed (exit ${r.status}):\n${`${r.stdout ?? ''}${r.stderr ?? ''}`.trim().slice(-4000)}`,
      );
    }
    log(`Resolved Temporal's time-skipping test server in ${((Date.now() - started) / 1000).toFixed(1)} s.`);
    return writeWrapper(wrapper, wrapperScript(java, readFileSync(classpathFile, 'utf8').trim()));
  } finally {
    releaseBuildLock(lock);
  }
}
