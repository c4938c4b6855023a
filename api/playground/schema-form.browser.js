// A form generated from a model's input schema (JSON Schema of the job's `input`), served as
// /playground/assets/schema-form.js (see api/playground/routes.ts). The schema comes from the API
// and is not trusted: every name, title and description goes into the page as text, never markup.
import { el } from './dom.js';

/** `num_inference_steps` -> "Num inference steps"; `guidanceScale` -> "Guidance scale". */
export function humanise(name) {
  const words = String(name)
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/[_\-.\s]+/g, ' ')
    .trim()
    .toLowerCase();
  return words ? words[0].toUpperCase() + words.slice(1) : String(name);
}

/** The one JSON type a property takes ("null" aside), or undefined. */
function mainType(prop) {
  const t = prop.type;
  if (Array.isArray(t)) return t.find((x) => x !== 'null');
  return typeof t === 'string' ? t : undefined;
}

/** Which control a property gets. Anything the form has no control for is typed as JSON. */
function kindOf(name, prop) {
  if (Array.isArray(prop.enum) && prop.enum.length > 0) return 'enum';
  if (Object.prototype.hasOwnProperty.call(prop, 'const')) return 'enum';
  const type = mainType(prop);
  if (type === 'string')
    return /prompt/i.test(name) || (typeof prop.maxLength === 'number' && prop.maxLength > 200) ? 'textarea' : 'text';
  if (type === 'integer' || type === 'number' || type === 'boolean') return type;
  return 'json';
}

const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

/** What is wrong with a control, for browsers that give no validationMessage of their own. */
function plainMessage(c) {
  const v = c.validity;
  if (v.valueMissing) return 'This field is required.';
  if (v.badInput) return 'Enter a number.';
  if (v.rangeUnderflow) return `Must be at least ${c.min}.`;
  if (v.rangeOverflow) return `Must be at most ${c.max}.`;
  if (v.stepMismatch) return `Must be a multiple of ${c.step}.`;
  if (v.tooShort) return `Must be at least ${c.minLength} characters.`;
  if (v.tooLong) return `Must be at most ${c.maxLength} characters.`;
  return 'This value is not allowed.';
}

/** The range a number property allows, as words for its help text. */
function rangeText(prop, kind) {
  const lo = isNum(prop.minimum) ? prop.minimum : isNum(prop.exclusiveMinimum) ? prop.exclusiveMinimum : undefined;
  const hi = isNum(prop.maximum) ? prop.maximum : isNum(prop.exclusiveMaximum) ? prop.exclusiveMaximum : undefined;
  const parts = [];
  if (lo !== undefined && hi !== undefined) parts.push(`${lo} to ${hi}`);
  else if (lo !== undefined) parts.push(`at least ${lo}`);
  else if (hi !== undefined) parts.push(`at most ${hi}`);
  if (isNum(prop.multipleOf) && !(kind === 'integer' && prop.multipleOf === 1))
    parts.push(`a multiple of ${prop.multipleOf}`);
  return parts.length > 0 ? `${kind === 'integer' ? 'A whole number' : 'A number'}, ${parts.join(', ')}.` : '';
}

const KIND_RANK = { textarea: 0, text: 1, integer: 2, number: 2, enum: 3, boolean: 4, json: 5 };
const explicitOrder = (prop) => [prop['x-order'], prop.propertyOrder].find(isNum);

/**
 * The properties in the order the form shows them. A schema's key order does not survive every
 * store (PostgreSQL's jsonb sorts keys by length), so it is not relied on: an explicit `x-order` or
 * `propertyOrder` wins; otherwise required fields first, then prompts and other text, numbers,
 * choices, boxes and JSON, each group in the order the schema gives.
 */
function orderedProperties(properties, required) {
  const list = Object.entries(properties).map(([name, raw], index) => {
    const prop = raw && typeof raw === 'object' ? raw : {};
    return { name, prop, kind: kindOf(name, prop), index };
  });
  if (list.some((p) => explicitOrder(p.prop) !== undefined)) {
    const at = (p) => explicitOrder(p.prop) ?? Number.MAX_SAFE_INTEGER;
    return list.sort((a, b) => at(a) - at(b) || a.index - b.index);
  }
  // A seed goes after the other numbers: it picks a variant rather than shaping the result.
  const rank = (p) => (required.has(p.name) ? 0 : 10) + KIND_RANK[p.kind] + (/(^|_)seed$/i.test(p.name) ? 0.5 : 0);
  return list.sort((a, b) => rank(a) - rank(b) || a.index - b.index);
}

/**
 * Builds the fields for `schema` (an object schema). Returns the fields' element, `collect()` (the
 * input the form describes now, and what in it is wrong) and `randomiseSeeds` for the seed buttons.
 */
export function buildSchemaForm(schema, { idPrefix = 'field' } = {}) {
  const properties =
    schema && typeof schema.properties === 'object' && schema.properties !== null ? schema.properties : {};
  const required = new Set(Array.isArray(schema?.required) ? schema.required.filter((r) => typeof r === 'string') : []);
  const root = el('div', { className: 'fields' });
  const fields = [];

  orderedProperties(properties, required).forEach(({ name, prop, kind }, index) => {
    const id = `${idPrefix}-${index}`;
    const isRequired = required.has(name);
    const hasDefault = Object.prototype.hasOwnProperty.call(prop, 'default');
    const label = typeof prop.title === 'string' && prop.title.trim() ? prop.title.trim() : humanise(name);
    const helpParts = [];
    if (typeof prop.description === 'string' && prop.description.trim()) helpParts.push(prop.description.trim());
    if (kind === 'integer' || kind === 'number') {
      const range = rangeText(prop, kind);
      if (range) helpParts.push(range);
    }
    if (kind === 'json') helpParts.push('JSON.');
    const helpId = helpParts.length > 0 ? `${id}-help` : undefined;
    const errorId = `${id}-error`;
    const describedBy = [helpId, errorId].filter(Boolean).join(' ');

    let control;
    if (kind === 'enum') {
      const values = Array.isArray(prop.enum) && prop.enum.length > 0 ? prop.enum : [prop.const];
      control = el('select', { id, name, required: isRequired, 'aria-describedby': describedBy });
      const defaultIndex = hasDefault
        ? values.findIndex((v) => JSON.stringify(v) === JSON.stringify(prop.default))
        : -1;
      // An empty choice when nothing is chosen by default: "not set" (optional) or "choose" (required).
      if (defaultIndex < 0 && !(isRequired && values.length === 1)) {
        control.append(el('option', { value: '', textContent: isRequired ? 'Choose…' : '(not set)' }));
      }
      values.forEach((v, i) => {
        const option = el('option', { value: String(i), textContent: typeof v === 'string' ? v : JSON.stringify(v) });
        if (i === defaultIndex) option.defaultSelected = true;
        control.append(option);
      });
      if (defaultIndex >= 0) control.value = String(defaultIndex);
    } else if (kind === 'boolean') {
      control = el('input', { id, name, type: 'checkbox', 'aria-describedby': describedBy });
      control.defaultChecked = prop.default === true;
      control.checked = prop.default === true;
    } else if (kind === 'integer' || kind === 'number') {
      control = el('input', {
        id,
        name,
        type: 'number',
        inputmode: kind === 'integer' ? 'numeric' : 'decimal',
        required: isRequired,
        'aria-describedby': describedBy,
      });
      const lo = isNum(prop.minimum) ? prop.minimum : isNum(prop.exclusiveMinimum) ? prop.exclusiveMinimum : undefined;
      const hi = isNum(prop.maximum) ? prop.maximum : isNum(prop.exclusiveMaximum) ? prop.exclusiveMaximum : undefined;
      if (lo !== undefined) control.min = String(lo);
      if (hi !== undefined) control.max = String(hi);
      if (isNum(prop.multipleOf) && prop.multipleOf > 0) control.step = String(prop.multipleOf);
      else control.step = kind === 'integer' ? '1' : 'any';
      if (isNum(prop.default)) control.defaultValue = String(prop.default);
    } else if (kind === 'textarea') {
      control = el('textarea', {
        id,
        name,
        rows: /negative/i.test(name) ? 2 : 4,
        required: isRequired,
        spellcheck: 'true',
        'aria-describedby': describedBy,
      });
    } else if (kind === 'text') {
      control = el('input', {
        id,
        name,
        type: 'text',
        required: isRequired,
        spellcheck: 'false',
        'aria-describedby': describedBy,
      });
    } else {
      control = el('textarea', {
        id,
        name,
        rows: 3,
        className: 'mono',
        required: isRequired,
        spellcheck: 'false',
        'aria-describedby': describedBy,
      });
      if (hasDefault) control.defaultValue = JSON.stringify(prop.default, null, 2);
    }
    if (kind === 'text' || kind === 'textarea') {
      if (typeof prop.default === 'string') control.defaultValue = prop.default;
      if (isNum(prop.maxLength)) control.maxLength = prop.maxLength;
      if (isNum(prop.minLength) && prop.minLength > 0) control.minLength = prop.minLength;
      if (!hasDefault && Array.isArray(prop.examples) && typeof prop.examples[0] === 'string')
        control.placeholder = prop.examples[0];
    }

    const labelNode = el(
      'label',
      { for: id },
      label,
      isRequired ? el('span', { className: 'required-mark', 'aria-hidden': 'true', textContent: ' *' }) : null,
    );
    const help = helpId ? el('p', { id: helpId, className: 'help', textContent: helpParts.join(' ') }) : null;
    const error = el('p', { id: errorId, className: 'field-error' });
    let row;
    if (kind === 'boolean') {
      row = el(
        'div',
        { className: 'field field-check' },
        el('div', { className: 'check-row' }, control, labelNode),
        help,
        error,
      );
    } else {
      let controlRow = control;
      if ((kind === 'integer' || kind === 'number') && /(^|_)seed$/i.test(name)) {
        // A seed picks one of many equally good results: one press draws a new one.
        const dice = el('button', {
          type: 'button',
          className: 'button button-quiet button-small',
          'aria-label': `Random ${label.toLowerCase()}`,
          textContent: 'Random',
        });
        dice.addEventListener('click', () => {
          const lo = control.min !== '' ? Math.ceil(Number(control.min)) : 0;
          const hi = control.max !== '' ? Math.floor(Number(control.max)) : 2 ** 31 - 1;
          control.value = String(lo + Math.floor(Math.random() * (Math.max(hi - lo, 0) + 1)));
          control.dispatchEvent(new Event('input', { bubbles: true }));
        });
        controlRow = el('div', { className: 'control-row' }, control, dice);
      }
      row = el('div', { className: `field field-${kind}` }, labelNode, controlRow, help, error);
    }
    root.append(row);
    fields.push({ name, prop, kind, control, error, isRequired, hasDefault });
  });

  // After a Run the form refused, every field shows what is wrong with it, and keeps doing so as it is edited.
  let showAll = false;

  /** The input as the form has it now, in the schema's order, and a message for each field that is wrong. */
  function collect() {
    const input = {};
    const problems = [];
    for (const f of fields) {
      let message = '';
      const c = f.control;
      if (f.kind === 'enum') {
        if (c.value !== '') {
          const values = Array.isArray(f.prop.enum) && f.prop.enum.length > 0 ? f.prop.enum : [f.prop.const];
          input[f.name] = values[Number(c.value)];
        }
      } else if (f.kind === 'boolean') {
        // A box can't say "not set": sent when the schema has a default or needs it, else only when ticked.
        if (f.isRequired || f.hasDefault || c.checked) input[f.name] = c.checked;
      } else if (f.kind === 'integer' || f.kind === 'number') {
        if (c.validity.badInput) message = 'Enter a number.';
        else if (c.value !== '') {
          const n = Number(c.value);
          if (!Number.isFinite(n)) message = 'Enter a number.';
          else if (f.kind === 'integer' && !Number.isInteger(n)) message = 'Enter a whole number.';
          else if (isNum(f.prop.exclusiveMinimum) && n <= f.prop.exclusiveMinimum)
            message = `Must be more than ${f.prop.exclusiveMinimum}.`;
          else if (isNum(f.prop.exclusiveMaximum) && n >= f.prop.exclusiveMaximum)
            message = `Must be less than ${f.prop.exclusiveMaximum}.`;
          input[f.name] = n;
        }
      } else if (f.kind === 'json') {
        const text = c.value.trim();
        if (text !== '') {
          try {
            input[f.name] = JSON.parse(text);
          } catch {
            message = 'Not valid JSON.';
          }
        }
      } else if (c.value !== '' || f.isRequired) {
        input[f.name] = c.value;
      }
      // Custom messages join the browser's own checks (required, min, max, step) on Run.
      c.setCustomValidity(message);
      const shown = showAll && !c.validity.valid ? c.validationMessage || plainMessage(c) : message;
      f.error.textContent = shown;
      if (shown) c.setAttribute('aria-invalid', 'true');
      else c.removeAttribute('aria-invalid');
      if (message) problems.push({ name: f.name, message });
    }
    return { input, problems };
  }

  /** Checks every field (the browser's checks and ours); shows each message; the first bad control, if any. */
  function check() {
    showAll = true;
    collect();
    return fields.map((f) => f.control).find((c) => !c.validity.valid);
  }

  return { element: root, collect, check, empty: fields.length === 0 };
}
