// Client code for a model call, as the playground's Code panel shows it (served as
// /playground/assets/snippets.js; see api/playground/routes.ts). Pure functions of the model's
// runUrl, its id and the input: no DOM, no key. The key is never written into a snippet: each one
// reads SERVICE_API_KEY from the environment.

/** A POSIX sh single-quoted word: a ' inside ends the quote, adds an escaped one, and reopens it. */
export function shellQuote(text) {
  return `'${String(text).replace(/'/g, "'\\''")}'`;
}

/** A sh double-quoted word that keeps $SERVICE_API_KEY expandable around it: ", $, ` and \ escaped. */
function shellDoubleQuote(text) {
  return `"${String(text).replace(/["$`\\]/g, '\\$&')}"`;
}

/**
 * A JSON value as a Python literal. JSON strings (double-quoted, JSON escapes) are valid Python
 * string literals, and so are JSON numbers; true/false/null become True/False/None.
 */
export function pythonLiteral(value, indent = '') {
  if (value === null || value === undefined) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (typeof value === 'number') return Number.isFinite(value) ? JSON.stringify(value) : 'None';
  if (typeof value === 'string') return JSON.stringify(value);
  const inner = `${indent}    `;
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    return `[\n${value.map((v) => `${inner}${pythonLiteral(v, inner)},`).join('\n')}\n${indent}]`;
  }
  const entries = Object.entries(value);
  if (entries.length === 0) return '{}';
  return `{\n${entries.map(([k, v]) => `${inner}${JSON.stringify(k)}: ${pythonLiteral(v, inner)},`).join('\n')}\n${indent}}`;
}

/** The job API's base (ending in /v2) from a model's runUrl (`.../v2/<modelId>`). */
export function apiBase(runUrl, modelId) {
  const suffix = `/${modelId}`;
  if (runUrl.endsWith(suffix)) return runUrl.slice(0, -suffix.length);
  return runUrl.replace(/\/[^/]*\/?$/, '');
}

/** curl to {runUrl}/runsync: prints the finished job (or, past the wait, its id to poll). */
export function curlSnippet(runUrl, input) {
  const body = JSON.stringify({ input }, null, 2);
  return [
    `curl -X POST ${shellDoubleQuote(`${runUrl}/runsync`)} \\`,
    '  -H "Authorization: Bearer $SERVICE_API_KEY" \\',
    '  -H "Content-Type: application/json" \\',
    `  -d ${shellQuote(body)}`,
    '',
  ].join('\n');
}

/** The hosted service's Python client (`pip install runpod`); run_sync answers the job's output. */
export function pythonSnippet(runUrl, modelId, input) {
  // run_sync wraps what it is given in {"input": ...} unless that has a truthy "input" key of its
  // own: an input with an "input" field is wrapped here, so it is never taken for the wrapper.
  const argument = Object.prototype.hasOwnProperty.call(input, 'input') ? { input } : input;
  return [
    'import os',
    '',
    'import runpod',
    '',
    'runpod.api_key = os.environ["SERVICE_API_KEY"]',
    `runpod.endpoint_url_base = ${JSON.stringify(apiBase(runUrl, modelId))}`,
    '',
    `endpoint = runpod.Endpoint(${JSON.stringify(modelId)})`,
    'result = endpoint.run_sync(',
    `    ${pythonLiteral(argument, '    ')},`,
    '    timeout=120,',
    ')',
    'print(result)',
    '',
  ].join('\n');
}

/** The hosted service's JavaScript client (`npm install runpod-sdk`, ESM); runSync answers the finished job. */
export function javascriptSnippet(runUrl, modelId, input) {
  const json = JSON.stringify(input, null, 2).replace(/\n/g, '\n  ');
  return [
    'import runpodSdk from "runpod-sdk";',
    '',
    `const runpod = runpodSdk(process.env.SERVICE_API_KEY, { baseUrl: ${JSON.stringify(apiBase(runUrl, modelId))} });`,
    `const endpoint = runpod.endpoint(${JSON.stringify(modelId)});`,
    'const result = await endpoint.runSync({',
    `  input: ${json},`,
    '});',
    'console.log(JSON.stringify(result));',
    '',
  ].join('\n');
}

export const LANGUAGES = [
  { id: 'curl', label: 'curl', make: (model, input) => curlSnippet(model.runUrl, input) },
  { id: 'python', label: 'Python', make: (model, input) => pythonSnippet(model.runUrl, model.id, input) },
  { id: 'javascript', label: 'JavaScript', make: (model, input) => javascriptSnippet(model.runUrl, model.id, input) },
];
