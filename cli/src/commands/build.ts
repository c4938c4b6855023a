import path from 'node:path';
import { Option, type Command } from 'commander';
import { buildArtifact, type BuildResult } from '../artifact.ts';
import { formatBytes, printJson, say } from '../output.ts';
import { PYTHON_VERSIONS } from '../project.ts';

export interface BuildFlags {
  deps: boolean;
  exclude?: string;
  output: string;
  pythonVersion?: string;
  json?: boolean;
}

/** The flags build and deploy share (docs/apps.md "Build and deploy"). */
export function addBuildOptions(command: Command): Command {
  return command
    .option('--no-deps', 'install only the listed packages, not what they depend on')
    .option(
      '--exclude <packages>',
      'comma-separated packages to leave out of deps/ (torch, torchvision, torchaudio, numpy and triton always are)',
    )
    .option('-o, --output <file>', 'where to write the artifact', 'artifact.tar.gz')
    .addOption(
      new Option(
        '--python-version <version>',
        "the workers' Python; overrides the resources' and gantry.toml's",
      ).choices(PYTHON_VERSIONS),
    )
    .option('--json', 'print the result as JSON');
}

export const parseExclude = (value: string | undefined): string[] =>
  (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

export function runBuild(flags: BuildFlags): Promise<BuildResult> {
  return buildArtifact({
    projectDir: process.cwd(),
    output: flags.output,
    deps: flags.deps,
    exclude: parseExclude(flags.exclude),
    pythonVersion: flags.pythonVersion,
  });
}

export function buildSummary(result: BuildResult): Record<string, unknown> {
  return {
    path: result.path,
    size: result.size,
    sha256: result.sha256,
    contentBytes: result.contentBytes,
    fingerprint: result.manifest.fingerprint,
    pythonVersion: result.manifest.pythonVersion,
    excluded: result.manifest.excluded,
    resources: result.manifest.resources.map((r) => ({
      name: r.name,
      kind: r.kind,
      file: r.file,
      ...(r.routes ? { routes: r.routes.map((x) => `${x.method} ${x.path}`) } : {}),
    })),
  };
}

export function registerBuild(program: Command): void {
  addBuildOptions(
    program
      .command('build')
      .description('build the deployment artifact (manifest, source, dependencies) without deploying'),
  ).action(async (flags: BuildFlags) => {
    const result = await runBuild(flags);
    if (flags.json) {
      printJson(buildSummary(result));
      return;
    }
    say(`artifact  ${path.relative(process.cwd(), result.path) || result.path}`);
    say(`size      ${formatBytes(result.size)} (${formatBytes(result.contentBytes)} uncompressed)`);
    say(`sha256    ${result.sha256}`);
    say(`python    ${result.manifest.pythonVersion}`);
    say('resources');
    const width = Math.max(...result.manifest.resources.map((r) => r.name.length));
    for (const r of result.manifest.resources) {
      const compute =
        'gpu' in r.compute ? `gpu ${r.compute.gpu.pools.join('|')} x${r.compute.gpu.count}` : `cpu ${r.compute.cpu}`;
      const shape =
        r.kind === 'lb'
          ? `load-balanced: ${(r.routes ?? []).map((x) => `${x.method} ${x.path}`).join(', ')}`
          : `queue-based: ${r.function}()`;
      say(`  ${r.name.padEnd(width)}  ${shape}  (${compute}, ${r.file})`);
    }
  });
}
