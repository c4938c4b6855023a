/**
 * WebSocket load for bench/lb-proxy.ts, in a process of its own so that its CPU is not the proxy's:
 * `connections` sockets to `url`, each sending a 64-byte message and waiting for its echo, again and
 * again for `seconds`. Prints `{ messages, perSecond, p50Ms, p99Ms }` as JSON.
 *
 *   node --import tsx bench/lb-ws-load.ts <ws-url> <connections> <seconds> [authorization]
 */
import WebSocket from 'ws';

const [url, connectionsArg, secondsArg, authorization] = process.argv.slice(2);
if (!url) throw new Error('usage: lb-ws-load.ts <ws-url> <connections> <seconds> [authorization]');
const connections = Number(connectionsArg ?? 10);
const seconds = Number(secondsArg ?? 5);
const payload = 'x'.repeat(64);

function open(): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url!, { headers: authorization ? { authorization } : {} });
    // The worker's first message says who answers; the echo starts after it.
    ws.once('message', () => resolve(ws));
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`handshake answered ${res.statusCode}`)));
  });
}

const sockets = await Promise.all(Array.from({ length: connections }, open));
const latencies: number[] = [];
let messages = 0;
const end = performance.now() + seconds * 1000;
await Promise.all(
  sockets.map(
    (ws) =>
      new Promise<void>((resolve) => {
        let sent = 0;
        const send = (): void => {
          if (performance.now() >= end) return resolve();
          sent = performance.now();
          ws.send(payload);
        };
        ws.on('message', () => {
          latencies.push(performance.now() - sent);
          messages++;
          send();
        });
        send();
      }),
  ),
);
for (const ws of sockets) ws.close();
latencies.sort((a, b) => a - b);
const at = (q: number): number => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
console.log(JSON.stringify({ messages, perSecond: messages / seconds, p50Ms: at(0.5), p99Ms: at(0.99) }));
