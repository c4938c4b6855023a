// The `flash login` approval page, served as /playground/assets/flash-login.js for /flash/login
// (see api/playground/routes.ts): flash prints this address with its request id; a user who gives
// their key sees where and when the request came from and approves or denies it over GraphQL
// (approveFlashAuthRequest, denyFlashAuthRequest). What the API answers reaches the page as text only.
/* global location */
import { forgetKey, onKeyGiven, storedKey } from './key.js';
import { byId, el } from './dom.js';

const REQUEST_ID = /^[A-Za-z0-9]{43}$/;
const FIELDS = 'id status createdAt expiresAt requesterIp';

function askForKey(message = '') {
  byId('view').replaceChildren();
  byId('key-panel').hidden = false;
  byId('key-error').textContent = message;
  byId('key-summary').textContent = '';
  byId('forget-key').hidden = true;
  byId('key-input').focus();
}

class KeyRefused extends Error {}

/** One GraphQL operation with the stored key; its data, or an Error with the server's message. */
async function graphql(query, variables) {
  const key = storedKey();
  if (!key) {
    askForKey();
    throw new KeyRefused('no key');
  }
  const response = await fetch('/graphql', {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ query, variables }),
    credentials: 'omit',
    cache: 'no-store',
    referrerPolicy: 'no-referrer',
  });
  const body = await response.json().catch(() => null);
  const message = body?.errors?.[0]?.message;
  if (response.status === 401) {
    forgetKey();
    askForKey(`The key was refused: ${message ?? `HTTP ${response.status}`}`);
    throw new KeyRefused(message);
  }
  if (message || !response.ok) throw new Error(message ?? `HTTP ${response.status}`);
  return body.data;
}

const when = (iso) => new Date(iso).toLocaleString();

function requestCard(request, notice) {
  const card = el(
    'section',
    { className: 'card', 'aria-labelledby': 'login-heading' },
    el('h1', { id: 'login-heading', textContent: 'Sign in flash' }),
    el('p', {
      textContent:
        'The hosted deploy tool asks for an API key of your account (read, write and run; no key management).',
    }),
    el(
      'dl',
      { className: 'meta' },
      el(
        'div',
        {},
        el('dt', { textContent: 'Asked from' }),
        el('dd', { id: 'login-ip', textContent: request.requesterIp }),
      ),
      el('div', {}, el('dt', { textContent: 'Asked at' }), el('dd', { textContent: when(request.createdAt) })),
      el('div', {}, el('dt', { textContent: 'Open until' }), el('dd', { textContent: when(request.expiresAt) })),
      el('div', {}, el('dt', { textContent: 'State' }), el('dd', { id: 'login-status', textContent: request.status })),
    ),
  );
  if (notice) card.append(notice);
  if (request.status === 'PENDING') {
    const approve = el('button', {
      type: 'button',
      id: 'approve',
      className: 'button button-primary',
      textContent: 'Approve',
    });
    const deny = el('button', { type: 'button', id: 'deny', className: 'button button-quiet', textContent: 'Deny' });
    approve.addEventListener('click', () => void decide(request.id, true));
    deny.addEventListener('click', () => void decide(request.id, false));
    card.append(el('p', {}, approve, ' ', deny));
  }
  return card;
}

function show(request, notice) {
  byId('key-panel').hidden = true;
  byId('key-summary').textContent = 'Key in use for this tab';
  byId('forget-key').hidden = false;
  byId('view').replaceChildren(requestCard(request, notice));
}

function showError(err) {
  if (err instanceof KeyRefused) return;
  byId('view').replaceChildren(
    el('div', { className: 'notice notice-error', role: 'alert' }, el('p', { textContent: err.message })),
  );
}

async function decide(id, approve) {
  const field = approve ? 'approveFlashAuthRequest' : 'denyFlashAuthRequest';
  try {
    const data = await graphql(`mutation ($id: String!) { ${field}(flashAuthRequestId: $id) { ${FIELDS} } }`, { id });
    const words = approve
      ? 'Approved: flash gets its key at its next poll. You can close this page.'
      : 'Denied: flash stops waiting.';
    show(data[field], el('p', { className: 'notice', role: 'status', id: 'login-done', textContent: words }));
  } catch (err) {
    showError(err);
  }
}

async function load() {
  const id = new URLSearchParams(location.search).get('request') ?? '';
  if (!REQUEST_ID.test(id)) {
    byId('view').replaceChildren(
      el('p', { className: 'notice notice-error', textContent: 'This address names no flash login request.' }),
    );
    return;
  }
  try {
    const data = await graphql(`query ($id: String!) { flashAuthRequest(flashAuthRequestId: $id) { ${FIELDS} } }`, {
      id,
    });
    show(data.flashAuthRequest);
  } catch (err) {
    showError(err);
  }
}

function start() {
  onKeyGiven(() => void load());
  byId('forget-key').addEventListener('click', () => {
    forgetKey();
    askForKey('The key is forgotten.');
  });
  if (storedKey()) void load();
  else askForKey();
}

start();
