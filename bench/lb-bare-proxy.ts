/**
 * The floor for a proxy written in Node on this machine, for bench/lb-proxy.ts: Node's HTTP server
 * and one undici agent forwarding every request to one worker, with no key, quota or choice of
 * worker, and the same header handling as Gantry's (hop-by-hop headers dropped, X-Forwarded-For set).
 *
 *   node bench/lb-bare-proxy.ts <port> <worker origin>
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { Agent, type Dispatcher } from 'undici';

const [port, origin] = process.argv.slice(2);
if (!port || !origin) throw new Error('usage: lb-bare-proxy.ts <port> <worker origin>');
const agent = new Agent();
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host', 'upgrade', 'te', 'trailer']);

createServer((req, res) => {
  const headers: Record<string, unknown> = {};
  for (const name in req.headers) if (!HOP.has(name)) headers[name] = req.headers[name];
  headers['x-forwarded-for'] = req.socket.remoteAddress;
  const withBody = req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0';
  agent.stream(
    {
      origin,
      path: req.url ?? '/',
      method: req.method as Dispatcher.HttpMethod,
      headers: headers as Dispatcher.RequestOptions['headers'],
      body: withBody ? req : undefined,
    },
    ({ statusCode, headers: answer }) => {
      const out: IncomingHttpHeaders = {};
      for (const name in answer) if (!HOP.has(name)) out[name] = answer[name] as string;
      res.writeHead(statusCode, out);
      return res;
    },
    (err) => {
      if (err && !res.headersSent) res.writeHead(502).end();
      else if (err) res.destroy();
    },
  );
}).listen(Number(port), '127.0.0.1');
