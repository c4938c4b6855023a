// The playground's page logic, served as /playground/assets/playground.js (see
// api/playground/routes.ts): the key prompt, the model list (/playground) and one model's page
// (/playground/<modelId>): its form, runs with live status, the result, and the Code panel.
// Everything the API answers is untrusted: it reaches the page as text nodes and checked URLs only.
/* global document, location */
import { buildCodePanel } from './code-panel.js';
import { byId, el, priceText, safeUrl, usd } from './dom.js';
import { forgetKey, onKeyGiven, storedKey } from './key.js';
import { buildSchemaForm } from './schema-form.js';

const MODEL_ID = /^(?=.{3,64}$)[a-z0-9]+(?:-[a-z0-9]+)+$/;
const FINAL = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT']);
/** The states a spinner goes with: the job is on its way. */
const BUSY = new Set(['SUBMITTING', 'IN_QUEUE', 'IN_PROGRESS']);
const POLL_MS = 500;
const STATUS_WORDS = {
  IN_QUEUE: 'Waiting for a worker',
  IN_PROGRESS: 'A worker is running the job',
  COMPLETED: 'Done',
  FAILED: 'The job failed',
  CANCELLED: 'The job was cancelled',
  TIMED_OUT: 'The job ran out of time',
};

// ---------------------------------------------------------------- the key

function showKeyState() {
  const has = Boolean(storedKey());
  byId('key-summary').textContent = has ? 'Key in use for this tab' : '';
  byId('forget-key').hidden = !has;
}

/** Clears the page and asks for a key; `message` says why (a refused key, a forgotten one). */
function askForKey(message = '') {
  stopRun();
  byId('view').replaceChildren();
  byId('key-panel').hidden = false;
  const error = byId('key-error');
  error.textContent = message;
  const input = byId('key-input');
  input.value = '';
  if (message) input.setAttribute('aria-invalid', 'true');
  else input.removeAttribute('aria-invalid');
  document.title = 'Gantry playground';
  showKeyState();
  input.focus();
}

// ---------------------------------------------------------------- the API

class ApiError extends Error {
  constructor(status, body) {
    const problem = body && typeof body === 'object' ? body : {};
    super(
      typeof problem.detail === 'string'
        ? problem.detail
        : typeof body === 'string' && body
          ? body.slice(0, 500)
          : `HTTP ${status}`,
    );
    this.status = status;
    this.title = typeof problem.title === 'string' ? problem.title : '';
    this.errors = Array.isArray(problem.errors) ? problem.errors.filter((e) => typeof e === 'string') : [];
  }
}

/** A refused key: already handled (the key is gone and the prompt is up); callers just stop. */
class KeyRefused extends Error {}

/** A same-origin call to /v2/... with the stored key; JSON in and out. */
async function api(method, path, body, signal) {
  const key = storedKey();
  if (!key) {
    askForKey();
    throw new KeyRefused('no key');
  }
  const headers = { authorization: `Bearer ${key}`, accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'omit',
    cache: 'no-store',
    referrerPolicy: 'no-referrer',
    signal,
  });
  const text = await response.text();
  let data = text;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON (a proxy's error page): kept as text for the message.
  }
  if (response.status === 401) {
    forgetKey();
    const why = new ApiError(401, data).message;
    askForKey(`The key was refused: ${why}`);
    throw new KeyRefused(why);
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

/** An error as the page shows it: the problem's status, detail and each of its errors. */
function errorBox(err, heading = 'Something went wrong') {
  const box = el('div', { className: 'notice notice-error', role: 'alert' });
  box.append(el('p', { className: 'notice-title', textContent: heading }));
  if (err instanceof ApiError) {
    box.append(el('p', { textContent: `${err.status}${err.title ? ` ${err.title}` : ''}: ${err.message}` }));
    if (err.errors.length > 0)
      box.append(
        el(
          'ul',
          { className: 'error-list' },
          err.errors.map((e) => el('li', { textContent: e })),
        ),
      );
  } else {
    box.append(el('p', { textContent: err instanceof Error ? err.message : String(err) }));
  }
  return box;
}

// ---------------------------------------------------------------- the model list

async function showModelList() {
  document.title = 'Public models · Gantry playground';
  const view = byId('view');
  const list = el('div', { className: 'loading', 'aria-busy': 'true', textContent: 'Loading models…' });
  view.replaceChildren(
    el(
      'div',
      { className: 'page-head' },
      el('h1', { textContent: 'Public models' }),
      el('p', {
        className: 'lede',
        textContent:
          'Models published on this Gantry. Pick one to try it in the browser and take the code that calls it.',
      }),
    ),
    list,
  );
  let models;
  try {
    models = await api('GET', '/v2/public-endpoints');
  } catch (err) {
    if (err instanceof KeyRefused) return;
    list.replaceWith(errorBox(err, 'The models could not be loaded'));
    return;
  }
  const usable = (Array.isArray(models) ? models : []).filter(
    (m) => m && typeof m.id === 'string' && MODEL_ID.test(m.id),
  );
  if (usable.length === 0) {
    list.replaceWith(el('p', { className: 'notice', textContent: 'No model has been published yet.' }));
    return;
  }
  const grid = el('ul', { className: 'model-grid' });
  for (const m of usable) {
    const name = typeof m.name === 'string' && m.name ? m.name : m.id;
    grid.append(
      el(
        'li',
        { className: 'card model-card' },
        el('h2', {}, el('a', { href: `/playground/${m.id}`, className: 'stretched', textContent: name })),
        el('p', { className: 'model-id' }, el('code', { textContent: m.id })),
        typeof m.description === 'string' && m.description
          ? el('p', { className: 'model-desc', textContent: m.description })
          : null,
        el(
          'p',
          { className: 'chips' },
          typeof m.outputKind === 'string'
            ? el('span', { className: `chip chip-kind`, textContent: m.outputKind })
            : null,
          priceText(m.price) ? el('span', { className: 'chip chip-price', textContent: priceText(m.price) }) : null,
        ),
      ),
    );
  }
  list.replaceWith(grid);
}

// ---------------------------------------------------------------- one model

/** The run in progress: its abort controller and the timer of its next poll. */
let current = null;

function stopRun() {
  if (!current) return;
  current.abort.abort();
  clearTimeout(current.timer);
  current = null;
}

async function showModel(modelId) {
  const view = byId('view');
  const loading = el('div', { className: 'loading', 'aria-busy': 'true', textContent: 'Loading the model…' });
  view.replaceChildren(loading);
  let model;
  try {
    model = await api('GET', `/v2/public-endpoints/${modelId}`);
  } catch (err) {
    if (err instanceof KeyRefused) return;
    loading.replaceWith(
      errorBox(err, `Model ${modelId} could not be loaded`),
      el('p', {}, el('a', { href: '/playground', textContent: 'All models' })),
    );
    return;
  }
  if (!model || typeof model !== 'object') return;
  // The page's own id, whatever the answer says: the calls below go to the model this page names.
  model = {
    ...model,
    id: modelId,
    runUrl: typeof model.runUrl === 'string' ? model.runUrl : `${location.origin}/v2/${modelId}`,
  };
  const name = typeof model.name === 'string' && model.name ? model.name : modelId;
  document.title = `${name} · Gantry playground`;

  const form = buildSchemaForm(model.inputSchema, { idPrefix: 'input' });
  const runButton = el('button', {
    type: 'submit',
    className: 'button button-primary',
    id: 'run-button',
    textContent: 'Run',
  });
  const cancelButton = el('button', {
    type: 'button',
    className: 'button button-quiet',
    id: 'cancel-button',
    textContent: 'Cancel',
    hidden: true,
  });
  const formNode = el(
    'form',
    { id: 'run-form', className: 'run-form', novalidate: true, 'aria-labelledby': 'input-heading' },
    form.empty
      ? el('p', { className: 'help', textContent: 'This model takes no input.' })
      : el(
          'p',
          { className: 'form-note' },
          'Fields marked ',
          el('span', { className: 'required-mark', textContent: '*' }),
          ' are required.',
        ),
    form.element,
    el(
      'div',
      { className: 'form-actions' },
      runButton,
      cancelButton,
      el('button', { type: 'reset', className: 'button button-quiet', textContent: 'Reset' }),
    ),
  );

  const statusText = el('span', {
    className: 'status-text',
    textContent: 'Not run yet: fill in the form and press Run.',
  });
  const statusBadge = el('span', { className: 'badge', hidden: true });
  const status = el(
    'div',
    { id: 'run-status', className: 'run-status', role: 'status', 'aria-live': 'polite' },
    statusBadge,
    statusText,
  );
  // The clock ticks outside the live region: a screen reader hears status changes, not every tenth.
  const elapsed = el('span', { className: 'elapsed', 'aria-hidden': 'true' });
  const result = el('div', { id: 'result', className: 'result' });

  const code = buildCodePanel(model);

  view.replaceChildren(
    el(
      'nav',
      { className: 'crumbs', 'aria-label': 'Breadcrumb' },
      el('a', { href: '/playground', textContent: 'Models' }),
      el('span', { 'aria-hidden': 'true', textContent: ' / ' }),
      el('span', { 'aria-current': 'page', textContent: name }),
    ),
    el(
      'div',
      { className: 'page-head' },
      el('h1', { textContent: name }),
      typeof model.description === 'string' && model.description
        ? el('p', { className: 'lede', textContent: model.description })
        : null,
      el(
        'dl',
        { className: 'meta' },
        el('div', {}, el('dt', { textContent: 'Model id' }), el('dd', {}, el('code', { textContent: modelId }))),
        typeof model.outputKind === 'string'
          ? el('div', {}, el('dt', { textContent: 'Output' }), el('dd', { textContent: model.outputKind }))
          : null,
        priceText(model.price)
          ? el('div', {}, el('dt', { textContent: 'Price' }), el('dd', { textContent: priceText(model.price) }))
          : null,
      ),
    ),
    el(
      'div',
      { className: 'model-layout' },
      el(
        'section',
        { className: 'card', 'aria-labelledby': 'input-heading' },
        el('h2', { id: 'input-heading', textContent: 'Input' }),
        formNode,
      ),
      el(
        'div',
        { className: 'side' },
        el(
          'section',
          { className: 'card', 'aria-labelledby': 'result-heading' },
          el('div', { className: 'card-head' }, el('h2', { id: 'result-heading', textContent: 'Result' }), elapsed),
          status,
          result,
        ),
        code.element,
      ),
    ),
  );

  const refreshCode = () => code.update(form.collect().input);
  formNode.addEventListener('input', refreshCode);
  formNode.addEventListener('change', refreshCode);
  // The reset event comes before the fields change back.
  formNode.addEventListener('reset', () => setTimeout(refreshCode, 0));
  refreshCode();

  formNode.addEventListener('submit', (event) => {
    event.preventDefault();
    const bad = form.check();
    if (bad) {
      bad.focus();
      return;
    }
    void run(model, form.collect().input, {
      runButton,
      cancelButton,
      status,
      statusBadge,
      statusText,
      elapsed,
      result,
    });
  });
  cancelButton.addEventListener('click', () => {
    if (current?.jobId) void api('POST', `/v2/${modelId}/cancel/${encodeURIComponent(current.jobId)}`).catch(() => {});
  });
}

function setStatus(ui, state, words) {
  ui.statusBadge.hidden = !state;
  ui.statusBadge.textContent = state ?? '';
  ui.statusBadge.className = `badge${state ? ` badge-${state.toLowerCase().replace(/[^a-z_]/g, '')}` : ''}`;
  ui.status.classList.toggle('is-busy', BUSY.has(state));
  ui.statusText.textContent = words;
}

/** Submits the input with /run, then polls /status every POLL_MS until the job is final. */
async function run(model, input, ui) {
  stopRun();
  const me = { abort: new AbortController(), timer: undefined, jobId: undefined };
  current = me;
  const started = Date.now();
  ui.runButton.disabled = true;
  ui.runButton.textContent = 'Running…';
  ui.result.replaceChildren();
  ui.elapsed.textContent = '';
  setStatus(ui, 'SUBMITTING', 'Submitting the job…');
  let lastState = 'SUBMITTING';
  const finish = () => {
    if (current === me) current = null;
    ui.runButton.disabled = false;
    ui.runButton.textContent = 'Run';
    ui.cancelButton.hidden = true;
  };
  try {
    let job = await api('POST', `/v2/${model.id}/run`, { input }, me.abort.signal);
    me.jobId = typeof job?.id === 'string' ? job.id : undefined;
    if (!me.jobId) throw new Error('the API answered no job id');
    ui.cancelButton.hidden = false;
    for (;;) {
      const state = typeof job?.status === 'string' ? job.status : 'UNKNOWN';
      ui.elapsed.textContent = `${((Date.now() - started) / 1000).toFixed(1)} s`;
      if (state !== lastState) {
        setStatus(ui, state, STATUS_WORDS[state] ?? state);
        lastState = state;
      }
      if (FINAL.has(state)) break;
      await new Promise((resolve) => {
        me.timer = setTimeout(resolve, POLL_MS);
      });
      if (current !== me) return;
      job = await api('GET', `/v2/${model.id}/status/${encodeURIComponent(me.jobId)}`, undefined, me.abort.signal);
    }
    if (current !== me) return;
    showResult(model, input, job, ui.result);
  } catch (err) {
    if (err instanceof KeyRefused || me.abort.signal.aborted) return;
    setStatus(ui, 'ERROR', 'The run could not go on');
    ui.result.replaceChildren(errorBox(err, 'The job could not be run'));
  } finally {
    finish();
  }
}

function showResult(model, input, job, target) {
  const output = job.output;
  const parts = [];
  if (job.status !== 'COMPLETED') {
    const box = el(
      'div',
      { className: 'notice notice-error', role: 'alert' },
      el('p', { className: 'notice-title', textContent: `${job.status}` }),
    );
    if (job.error !== undefined && job.error !== null)
      box.append(
        el('pre', {
          className: 'error-text',
          textContent: typeof job.error === 'string' ? job.error : JSON.stringify(job.error, null, 2),
        }),
      );
    parts.push(box);
  }
  const out = output && typeof output === 'object' && !Array.isArray(output) ? output : {};
  const prompt = typeof input.prompt === 'string' && input.prompt.trim() ? input.prompt.trim() : '';
  const media = [];
  const image = safeUrl(out.image_url);
  const video = safeUrl(out.video_url);
  const audio = safeUrl(out.audio_url);
  if (image)
    media.push([
      'image',
      el('img', { src: image, alt: prompt || `Image made by ${model.name ?? model.id}`, className: 'result-media' }),
    ]);
  if (video)
    media.push([
      'video',
      el('video', { src: video, controls: true, className: 'result-media', 'aria-label': prompt || 'Video output' }),
    ]);
  if (audio)
    media.push([
      'audio',
      el('audio', { src: audio, controls: true, className: 'result-audio', 'aria-label': prompt || 'Audio output' }),
    ]);
  for (const [kind, node] of media) {
    parts.push(el('figure', { className: `media media-${kind}` }, node));
  }

  const stats = el('dl', { className: 'stats' });
  if (typeof out.cost === 'number')
    stats.append(
      el(
        'div',
        {},
        el('dt', { textContent: 'Cost' }),
        el('dd', { id: 'result-cost', textContent: usd.format(out.cost) }),
      ),
    );
  if (typeof job.delayTime === 'number')
    stats.append(
      el('div', {}, el('dt', { textContent: 'Queue delay' }), el('dd', { textContent: `${job.delayTime} ms` })),
    );
  if (typeof job.executionTime === 'number')
    stats.append(
      el('div', {}, el('dt', { textContent: 'Execution' }), el('dd', { textContent: `${job.executionTime} ms` })),
    );
  if (stats.childElementCount > 0) parts.push(stats);

  const links = [];
  for (const [label, url] of [
    ['Open image', image],
    ['Open video', video],
    ['Open audio', audio],
  ]) {
    if (url) links.push(el('a', { href: url, target: '_blank', rel: 'noopener noreferrer', textContent: label }));
  }
  if (links.length > 0) parts.push(el('p', { className: 'result-links' }, links));

  if (output !== undefined && output !== null) {
    const pre = el('pre', { className: 'output-json', tabindex: '0', textContent: JSON.stringify(output, null, 2) });
    if (media.length > 0)
      parts.push(el('details', { className: 'raw' }, el('summary', { textContent: 'Output JSON' }), pre));
    else parts.push(el('h3', { className: 'sub', textContent: 'Output' }), pre);
  }
  parts.push(el('p', { className: 'job-id' }, 'Job ', el('code', { textContent: String(job.id ?? '') })));
  target.replaceChildren(...parts);
}

// ---------------------------------------------------------------- start

function route() {
  byId('key-panel').hidden = true;
  showKeyState();
  const path = location.pathname.replace(/\/+$/, '');
  if (path === '/playground') return showModelList();
  const match = /^\/playground\/([^/]+)$/.exec(path);
  const id = match ? match[1] : '';
  if (!MODEL_ID.test(id)) {
    byId('view').replaceChildren(
      el('p', { className: 'notice notice-error', textContent: 'This address names no model.' }),
    );
    return undefined;
  }
  return showModel(id);
}

function start() {
  onKeyGiven(() => {
    void route();
    byId('main').focus();
  });
  byId('forget-key').addEventListener('click', () => {
    forgetKey();
    askForKey();
    byId('key-error').textContent = 'The key is forgotten.';
  });
  if (storedKey()) void route();
  else askForKey();
}

start();
