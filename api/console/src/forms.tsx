/**
 * The parts the console's forms share: a labelled control with its error beside it, a submit that
 * maps a 422's errors onto fields, a form's notices, a delete confirmed in place, a list's states.
 */
import type { ComponentChildren, JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, fieldErrors, messageOf } from './api.ts';

/** What a control needs to be tied to its label and its error. */
export interface ControlProps {
  id: string;
  'aria-invalid'?: 'true';
  'aria-describedby'?: string;
}

/**
 * A labelled control with its hint and its validation error beside it: the error is named by the
 * control's aria-describedby and marks it aria-invalid, so a screen reader reads it with the field.
 */
export function Field({
  id,
  label,
  hint,
  error,
  control,
}: {
  id: string;
  label: string;
  hint?: ComponentChildren;
  error?: string;
  control: (p: ControlProps) => JSX.Element;
}) {
  const describedBy = [hint ? `${id}-hint` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ');
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {control({
        id,
        ...(error ? { 'aria-invalid': 'true' as const } : {}),
        ...(describedBy ? { 'aria-describedby': describedBy } : {}),
      })}
      {hint && (
        <p id={`${id}-hint`} class="hint">
          {hint}
        </p>
      )}
      {error && (
        <p id={`${id}-error`} class="field-error">
          {error}
        </p>
      )}
    </div>
  );
}

/**
 * A create form's state: errors by field (the API's `$.field: ...` lines, or the page's own checks)
 * and a notice for the rest. `fields` are the form's fields: an error of a nested path
 * (`ports.0`, `env.KEY`) goes beside its top field, one of a field the form lacks goes in the notice.
 */
export function useSubmit(fields: readonly string[]) {
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [notice, setNotice] = useState('');
  const [done, setDone] = useState('');
  const [busy, setBusy] = useState(false);
  const form = useRef<HTMLFormElement>(null);
  /** Shows these errors and moves focus to the first field with one (a keyboard user lands on it). */
  const show = (byField: Record<string, string>, rest: string[]) => {
    setErrors(byField);
    setNotice(rest.join('; '));
    const first = fields.find((f) => byField[f]);
    if (first)
      requestAnimationFrame(() => form.current?.querySelector<HTMLElement>(`[data-field="${first}"]`)?.focus());
  };
  const submit = async (run: () => Promise<string>, own: Record<string, string> = {}) => {
    setDone('');
    if (Object.keys(own).length > 0) return show(own, []);
    setBusy(true);
    try {
      setDone(await run());
      setErrors({});
      setNotice('');
    } catch (err) {
      const byField: Record<string, string> = {};
      const rest: string[] = [];
      if (err instanceof ApiError && err.errors.length > 0) {
        for (const [path, message] of Object.entries(fieldErrors(err.errors))) {
          const top = path.split('.')[0]!;
          if (fields.includes(top)) byField[top] = byField[top] ? `${byField[top]}; ${message}` : message;
          else rest.push(path ? `${path}: ${message}` : message);
        }
        if (Object.keys(byField).length === 0 || rest.length > 0) rest.unshift(err.message);
      } else rest.push(messageOf(err));
      show(byField, rest);
    } finally {
      setBusy(false);
    }
  };
  return { errors, notice, done, busy, form, submit };
}

/** The notices under a create form: what went wrong beyond single fields, or what was made. */
export function FormNotices({ notice, done }: { notice: string; done: string }) {
  return (
    <>
      {notice && (
        <p class="notice error" role="alert">
          {notice}
        </p>
      )}
      <p class="done" role="status">
        {done}
      </p>
    </>
  );
}

/**
 * A button that asks first, in place (no window.confirm): `label`, then `question` with `yes` or
 * Cancel (Escape too). Focus moves to the answer and back, so it works from the keyboard.
 */
export function Confirm({
  label,
  name,
  question,
  yes,
  run,
}: {
  label: string;
  /** The button's accessible name (which row it acts on). */
  name: string;
  question: string;
  yes: string;
  run: () => Promise<void>;
}) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const yesButton = useRef<HTMLButtonElement>(null);
  const askButton = useRef<HTMLButtonElement>(null);
  const asked = useRef(false);
  useEffect(() => {
    if (asking) yesButton.current?.focus();
    else if (asked.current) askButton.current?.focus();
    asked.current = asking;
  }, [asking]);
  if (!asking)
    return (
      <span class="confirm">
        <button type="button" class="quiet" ref={askButton} aria-label={name} onClick={() => setAsking(true)}>
          {label}
        </button>
        {error && (
          <span class="error" role="alert">
            {' '}
            {error}
          </span>
        )}
      </span>
    );
  return (
    <span
      class="confirm asking"
      role="group"
      aria-label={question}
      onKeyDown={(e) => e.key === 'Escape' && setAsking(false)}
    >
      <span>{question}</span>{' '}
      <button
        type="button"
        class="danger"
        ref={yesButton}
        disabled={busy}
        onClick={async () => {
          setBusy(true);
          setError('');
          try {
            await run();
            setAsking(false);
          } catch (err) {
            setError(messageOf(err));
            setAsking(false);
          } finally {
            setBusy(false);
          }
        }}
      >
        {yes}
      </button>{' '}
      <button type="button" class="quiet" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}

/** Confirm for a Delete button: "Delete <what>?", then "Yes, delete" or Cancel. */
export function ConfirmDelete({ what, remove }: { what: string; remove: () => Promise<void> }) {
  return <Confirm label="Delete" name={`Delete ${what}`} question={`Delete ${what}?`} yes="Yes, delete" run={remove} />;
}

/** A list's loading and read-error states, or the list. */
export function Loaded<T>({
  data,
  error,
  children,
}: {
  data: T | null;
  error: string;
  children: (data: T) => ComponentChildren;
}) {
  return (
    <>
      {error && (
        <p class="notice error" role="alert">
          {error}
        </p>
      )}
      {data === null ? !error && <p aria-busy="true">Loading…</p> : children(data)}
    </>
  );
}

/** A text input's value in a submit handler. */
export const valueOf = (form: HTMLFormElement, name: string): string =>
  (form.elements.namedItem(name) as HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement | null)?.value ?? '';

// ---------------------------------------------------------------- the page
