/** What the security tests look at from inside a container and what they stand up beside it (not a test file itself). */
import { execFile, spawn, spawnSync } from 'node:child_process';
import { networkInterfaces } from 'node:os';
import { promisify } from 'node:util';
import { randomString } from '../../domain/shared/index.ts';

/** The node script that connects (TCP, or a GET for http URLs) and prints 'open', an error code, or the HTTP status and body. */
function probeScript(target: string): string {
  return target.startsWith('http')
    ? `fetch(${JSON.stringify(target)}, { signal: AbortSignal.timeout(3000) }).then(async (r) => console.log(r.status, (await r.text()).slice(0, 100)), (e) => console.log('error ' + (e.cause?.code ?? e.name)))`
    : `const [h, p] = ${JSON.stringify(target.split(':'))}; const s = require('net').connect({ host: h, port: Number(p), timeout: 3000 });
       s.on('connect', () => { console.log('open'); s.destroy(); }); s.on('error', (e) => console.log(e.code)); s.on('timeout', () => { console.log('timeout'); s.destroy(); });`;
}

/**
 * Runs a TCP connect (or, for http URLs, a GET) from inside a running container: 'open', an error
 * code, or the HTTP status (and the start of the body). Asynchronous: a platform answering it may
 * run in this process.
 */
export async function fromInside(container: string, target: string): Promise<string> {
  const r = await promisify(execFile)('podman', ['exec', container, 'node', '-e', probeScript(target)], {
    encoding: 'utf8',
    timeout: 30_000,
  }).catch((e: { stdout?: string; stderr?: string }) => e);
  return (r.stdout || r.stderr || '').trim();
}

/** The same from a fresh container of `image` (which has node) on `network`, removed afterwards. */
export async function fromNewContainer(image: string, network: string, target: string): Promise<string> {
  const r = await promisify(execFile)(
    'podman',
    ['run', '--rm', '--network', network, '--cap-drop', 'NET_RAW', '--', image, 'node', '-e', probeScript(target)],
    { encoding: 'utf8', timeout: 60_000 },
  ).catch((e: { stdout?: string; stderr?: string }) => e);
  return (r.stdout || r.stderr || '').trim();
}

function run(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr}`);
}

export interface StandInServer {
  /** http://address:port/ */
  url: string;
  stop(): void;
}

/**
 * Removes what a run killed before its cleanup left holding `hostAddress`: that veth (with its peer)
 * and its namespace. The older route would win over a new stand-in's, and the empty namespace
 * behind it refuses every connection.
 */
function removeLeftoverStandIns(hostAddress: string): void {
  const links = JSON.parse(spawnSync('ip', ['-j', '-4', 'addr', 'show'], { encoding: 'utf8' }).stdout || '[]') as {
    ifname: string;
    link_netnsid?: number;
    addr_info?: { local: string }[];
  }[];
  const namespaces = JSON.parse(spawnSync('ip', ['-j', 'netns', 'list'], { encoding: 'utf8' }).stdout || '[]') as {
    name: string;
    id?: number;
  }[];
  for (const link of links.filter((l) => l.addr_info?.some((a) => a.local === hostAddress))) {
    spawnSync('ip', ['link', 'del', link.ifname]);
    const ns = namespaces.find((n) => n.id !== undefined && n.id === link.link_netnsid);
    if (ns && /^gw[a-z0-9]{6}$/.test(ns.name)) spawnSync('ip', ['netns', 'del', ns.name]);
  }
}

/**
 * An HTTP server answering `body` on `address`:80 inside a network namespace of its own, wired to
 * this machine by a veth pair whose host side is `hostAddress`/`prefix`: a stand-in for a cloud's
 * metadata service or a private machine beside the host.
 */
export async function standInServer(
  address: string,
  hostAddress: string,
  prefix: number,
  body: string,
): Promise<StandInServer> {
  removeLeftoverStandIns(hostAddress);
  const ns = `gw${randomString(6)}`;
  const [outside, inside] = [`${ns}h`, `${ns}n`];
  const stop = (): void => {
    child?.kill('SIGKILL');
    spawnSync('ip', ['netns', 'del', ns]);
  };
  let child: ReturnType<typeof spawn> | undefined;
  try {
    run('ip', ['netns', 'add', ns]);
    run('ip', ['link', 'add', outside, 'type', 'veth', 'peer', 'name', inside]);
    run('ip', ['link', 'set', inside, 'netns', ns]);
    run('ip', ['addr', 'add', `${hostAddress}/${prefix}`, 'dev', outside]);
    run('ip', ['link', 'set', outside, 'up']);
    run('ip', ['netns', 'exec', ns, 'ip', 'addr', 'add', `${address}/${prefix}`, 'dev', inside]);
    run('ip', ['netns', 'exec', ns, 'ip', 'link', 'set', inside, 'up']);
    run('ip', ['netns', 'exec', ns, 'ip', 'route', 'add', 'default', 'via', hostAddress]);
    const script = `require('http').createServer((q, r) => r.end(${JSON.stringify(body)})).listen(80, ${JSON.stringify(address)}, () => console.log('listening'))`;
    child = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    await new Promise<void>((resolve, reject) => {
      child!.stdout!.on('data', (d: Buffer) => d.toString().includes('listening') && resolve());
      child!.once('exit', (code) => reject(new Error(`stand-in server exited (${code}): ${stderr}`)));
      setTimeout(() => reject(new Error(`stand-in server not up in 10 s: ${stderr}`)), 10_000).unref();
    });
    return { url: `http://${address}/`, stop };
  } catch (err) {
    stop();
    throw err;
  }
}

/**
 * The host's own IPv4 addresses, without container bridges: other tests' networks come and go while
 * this one runs, and an address that is gone is routed off the machine, where this sandbox's network
 * accepts any TCP connection (so a probe would read 'open'). A test probes the gateways it
 * knows by name.
 */
export const hostAddresses = (): string[] => [
  ...new Set(
    Object.entries(networkInterfaces())
      .filter(([name]) => !/^(cni-podman\d+|podman\d+|docker0|br-)/.test(name))
      .flatMap(([, list]) => (list ?? []).filter((a) => a.family === 'IPv4').map((a) => a.address)),
  ),
];
