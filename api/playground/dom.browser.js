// The playground's small DOM and formatting helpers, served as /playground/assets/dom.js (see
// api/playground/routes.ts) and shared by its other scripts.
/* global document, location */

/** Props set as properties; every other prop becomes an attribute (true: present and empty). */
const PROPERTIES = new Set(['className', 'textContent', 'id', 'type', 'hidden', 'name']);

/** Costs and prices in US dollars, to the millionth where needed. */
export const usd = new Intl.NumberFormat('en-US', {
  style: 'currency',
  currency: 'USD',
  minimumFractionDigits: 2,
  maximumFractionDigits: 6,
});

/** A new `tag` element with `props` and `children` (nodes or strings, added as text). */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (PROPERTIES.has(k)) node[k] = v;
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) node.append(c);
  return node;
}

export const byId = (id) => document.getElementById(id);

/** An http(s) URL from the API as an absolute address, or null: nothing else becomes a src or href. */
export function safeUrl(value) {
  if (typeof value !== 'string') return null;
  try {
    const u = new URL(value, location.href);
    return u.protocol === 'https:' || u.protocol === 'http:' ? u.href : null;
  } catch {
    return null;
  }
}

/** A model's price as "$0.0025 per call", or '' when it has none. */
export function priceText(price) {
  if (!price || typeof price.amount !== 'number') return '';
  const per = { call: 'call', megapixel: 'megapixel', second: 'second' }[price.unit] ?? String(price.unit);
  return `${usd.format(price.amount)} per ${per}`;
}
