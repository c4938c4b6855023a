import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { get, REFUSED, signOut, storedKey, type Answer } from './api.ts';
import { usePolled } from './poll.ts';

/** Lines kept in memory (and on the page); older ones are dropped. */
export const MAX_LINES = 2000;
/** Lines of the past the first connection asks for. */
const TAIL = 200;
/** Wait before reconnecting when the server names none (SSE `retry`). */
const DEFAULT_RETRY_MS = 2000;

/** A `log` event's data (the document describes no body of the stream), counted as it comes. */
interface LogLine {
  /** Counts lines as they come, for Preact's keys (times repeat and may be empty). */
  n: number;
  time: string;
  stream: 'stdout' | 'stderr';
  line: string;
}
interface SseEvent {
  event: string;
  data: string;
  id: string | undefined;
}

/**
 * A Server-Sent Events parser for text as it arrives (the stream's format: lines of `field: value`,
 * an event ending at a blank line; `id` and `retry` kept; comments and unknown fields ignored).
 * EventSource cannot send an Authorization header, and the key must never be in a URL, hence fetch
 * and this.
 */
export class SseParser {
  private buffer = '';
  private event = '';
  private data: string[] = [];
  private id: string | undefined;
  retryMs: number | undefined;

  constructor(private readonly emit: (e: SseEvent) => void) {}

  push(chunk: string): void {
    this.buffer += chunk;
    for (;;) {
      const end = this.buffer.search(/\r\n|\r|\n/);
      // A lone \r at the end may be half of \r\n: wait for more.
      if (end < 0 || (end === this.buffer.length - 1 && this.buffer[end] === '\r')) return;
      const line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + (this.buffer.startsWith('\r\n', end) ? 2 : 1));
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === '') {
      if (this.data.length > 0 || this.event)
        this.emit({ event: this.event || 'message', data: this.data.join('\n'), id: this.id });
      this.event = '';
      this.data = [];
      this.id = undefined;
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
    else if (field === 'id' && !value.includes('\0')) this.id = value;
    else if (field === 'retry' && /^\d+$/.test(value)) this.retryMs = Number(value);
  }
}

type StreamState =
  | { kind: 'connecting' }
  | { kind: 'live' }
  | { kind: 'reconnecting'; why: string }
  | { kind: 'ended'; why: string }
  | { kind: 'failed'; why: string };

/**
 * Follows a worker's log stream until `signal` aborts or the stream says it ended: a dropped
 * connection is opened again after the server's `retry`, with Last-Event-ID so that it resumes
 * after the last line seen. A 401 signs out; other refusals (404, 409: the worker is gone) end it.
 */
async function followLogs(
  url: string,
  signal: AbortSignal,
  onLine: (l: Omit<LogLine, 'n'>) => void,
  onState: (s: StreamState) => void,
): Promise<void> {
  let lastId: string | undefined;
  let retryMs = DEFAULT_RETRY_MS;
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
    });
  while (!signal.aborted) {
    const key = storedKey();
    if (!key) return signOut('Sign in with an API key.');
    let ended = false;
    try {
      const r = await fetch(url, {
        headers: {
          authorization: `Bearer ${key}`,
          accept: 'text/event-stream',
          ...(lastId ? { 'last-event-id': lastId } : {}),
        },
        signal,
        credentials: 'omit',
        cache: 'no-store',
      });
      if (r.status === 401) return signOut(REFUSED);
      if (!r.ok || !r.body) {
        const problem = (await r.json().catch(() => undefined)) as { detail?: string } | undefined;
        const why = problem?.detail ?? `the API answered ${r.status}`;
        // A host that cannot be reached now (503) or a rate limit may pass; the rest will not.
        if (r.status !== 503 && r.status !== 429) return onState({ kind: 'failed', why });
        onState({ kind: 'reconnecting', why });
      } else {
        onState({ kind: 'live' });
        const parser = new SseParser((e) => {
          if (e.id) lastId = e.id;
          if (e.event === 'log') {
            const l = JSON.parse(e.data) as Omit<LogLine, 'n'>;
            onLine({
              time: String(l.time ?? ''),
              stream: l.stream === 'stderr' ? 'stderr' : 'stdout',
              line: String(l.line ?? ''),
            });
          } else if (e.event === 'end') {
            ended = true;
            onState({ kind: 'ended', why: 'The output ended: the container stopped.' });
          } else if (e.event === 'error') {
            onState({ kind: 'reconnecting', why: 'reading the logs failed on the server' });
          }
        });
        const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          parser.push(value);
        }
        retryMs = parser.retryMs ?? retryMs;
        if (ended) return;
        onState({ kind: 'reconnecting', why: 'the stream was cut' });
      }
    } catch (err) {
      if (signal.aborted) return;
      onState({ kind: 'reconnecting', why: err instanceof Error ? err.message : String(err) });
    }
    await pause(retryMs);
  }
}

/** The live output of one worker: text only (tenant output), the last MAX_LINES lines, autoscrolled unless paused. */
function WorkerLogs({ endpointId, workerId }: { endpointId: string; workerId: string }) {
  const [lines, setLines] = useState<LogLine[]>([]);
  const [state, setState] = useState<StreamState>({ kind: 'connecting' });
  const [paused, setPaused] = useState(false);
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    setLines([]);
    setState({ kind: 'connecting' });
    const abort = new AbortController();
    let n = 0;
    let pending: LogLine[] = [];
    let timer: ReturnType<typeof setTimeout> | undefined;
    // Lines come in bursts (the tail, a chatty worker): one render per 50 ms, not per line.
    const flush = () => {
      timer = undefined;
      const batch = pending;
      pending = [];
      setLines((was) => {
        const all = was.concat(batch);
        return all.length > MAX_LINES ? all.slice(all.length - MAX_LINES) : all;
      });
    };
    const url = `/v2/serverless/${encodeURIComponent(endpointId)}/workers/${encodeURIComponent(workerId)}/logs?tail=${TAIL}`;
    void followLogs(
      url,
      abort.signal,
      (l) => {
        pending.push({ ...l, n: n++ });
        if (pending.length > MAX_LINES) pending = pending.slice(pending.length - MAX_LINES);
        timer ??= setTimeout(flush, 50);
      },
      (s) => !abort.signal.aborted && setState(s),
    );
    return () => {
      abort.abort();
      if (timer) clearTimeout(timer);
    };
  }, [endpointId, workerId]);
  useLayoutEffect(() => {
    if (!paused && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [lines, paused]);
  return (
    <>
      <div class="actions">
        <button type="button" class="quiet" aria-pressed={paused ? 'true' : 'false'} onClick={() => setPaused(!paused)}>
          {paused ? 'Resume autoscroll' : 'Pause autoscroll'}
        </button>
        <button type="button" class="quiet" onClick={() => setLines([])}>
          Clear
        </button>
        <span class="meta" role="status" data-state={state.kind}>
          {state.kind === 'connecting'
            ? 'Connecting…'
            : state.kind === 'live'
              ? `Live · ${lines.length} lines (the last ${MAX_LINES} are kept)`
              : state.kind === 'reconnecting'
                ? `Reconnecting (${state.why})…`
                : state.why}
        </span>
      </div>
      {state.kind === 'failed' && (
        <p class="notice error" role="alert">
          {state.why}
        </p>
      )}
      <div class="logs" ref={box} role="log" aria-label={`Logs of worker ${workerId}`} tabIndex={0}>
        {lines.map((l) => (
          <div key={l.n} class={`log-line ${l.stream}`} data-stream={l.stream}>
            <span class="log-time">{l.time}</span> <span class="log-text">{l.line}</span>
          </div>
        ))}
      </div>
    </>
  );
}

/**
 * The Logs tab: the live output of one of the endpoint's workers (GET
 * /v2/serverless/{id}/workers/{workerId}/logs, Server-Sent Events read with fetch), chosen from its
 * workers (GET /v2/serverless/{id}/workers). Leaving the tab closes the stream.
 */
export function LogsTab({ id }: { id: string }) {
  const { data, error } = usePolled(
    () => get<Answer<'/v2/serverless/{id}/workers', 'get'>>(`/v2/serverless/${encodeURIComponent(id)}/workers`),
    [id],
  );
  const [chosen, setChosen] = useState<string | null>(null);
  const workers = data?.workers ?? [];
  // The chosen worker while it is listed, else the first (a replaced worker's successor).
  const workerId = workers.some((w) => w.id === chosen) ? chosen : (workers[0]?.id ?? null);
  return (
    <section aria-label="Logs">
      {error && (
        <p class="notice error" role="alert">
          {error}
        </p>
      )}
      {data === null ? (
        !error && <p aria-busy="true">Loading…</p>
      ) : workers.length === 0 ? (
        <p class="notice empty">No workers now: logs come from a worker's container while it runs.</p>
      ) : (
        <>
          <div class="filters">
            <label for="log-worker">Worker</label>
            <select id="log-worker" value={workerId ?? ''} onChange={(e) => setChosen(e.currentTarget.value)}>
              {workers.map((w) => (
                <option key={w.id} value={w.id}>
                  {w.id} ({w.status.toLowerCase()}
                  {w.version !== null ? `, release ${w.version}` : ''})
                </option>
              ))}
            </select>
          </div>
          {workerId && <WorkerLogs key={workerId} endpointId={id} workerId={workerId} />}
        </>
      )}
    </section>
  );
}
