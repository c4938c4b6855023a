// The model page's Code panel, served as /playground/assets/code-panel.js (see
// api/playground/routes.ts): the client code for the form's input in each language, as tabs, and a
// Copy button that falls back to selecting the code where the clipboard is refused.
/* global window */
import { el } from './dom.js';
import { LANGUAGES } from './snippets.js';

/** The tabs (curl, Python, JavaScript) with the code for the form's input, and a Copy button. */
export function buildCodePanel(model) {
  const tabs = [];
  const panels = [];
  const codes = [];
  const tablist = el('div', { role: 'tablist', 'aria-label': 'Client language', className: 'tabs' });
  LANGUAGES.forEach((lang, i) => {
    const tab = el('button', {
      type: 'button',
      role: 'tab',
      id: `tab-${lang.id}`,
      className: 'tab',
      'aria-controls': `panel-${lang.id}`,
      'aria-selected': i === 0 ? 'true' : 'false',
      tabindex: i === 0 ? '0' : '-1',
      textContent: lang.label,
    });
    const codeNode = el('code', { id: `code-${lang.id}`, className: `language-${lang.id}` });
    const panel = el(
      'div',
      {
        role: 'tabpanel',
        id: `panel-${lang.id}`,
        'aria-labelledby': `tab-${lang.id}`,
        tabindex: '0',
        className: 'tabpanel',
        hidden: i !== 0,
      },
      el('pre', { className: 'code' }, codeNode),
    );
    tabs.push(tab);
    panels.push(panel);
    codes.push(codeNode);
    tablist.append(tab);
  });
  const copyStatus = el('p', { className: 'copy-status', role: 'status' });
  const copy = el('button', {
    type: 'button',
    className: 'button button-quiet button-small',
    id: 'copy-code',
    textContent: 'Copy',
  });
  let active = 0;
  const select = (i, focus) => {
    active = (i + tabs.length) % tabs.length;
    tabs.forEach((t, j) => {
      t.setAttribute('aria-selected', j === active ? 'true' : 'false');
      t.tabIndex = j === active ? 0 : -1;
      panels[j].hidden = j !== active;
    });
    if (focus) tabs[active].focus();
    // What was copied is another tab's code: the note would mislead.
    copyStatus.textContent = '';
    copy.textContent = 'Copy';
  };
  tabs.forEach((tab, i) => {
    tab.addEventListener('click', () => select(i, false));
    tab.addEventListener('keydown', (event) => {
      const to = { ArrowRight: active + 1, ArrowLeft: active - 1, Home: 0, End: tabs.length - 1 }[event.key];
      if (to === undefined) return;
      event.preventDefault();
      select(to, true);
    });
  });

  let resetLabel;
  copy.addEventListener('click', async () => {
    const text = codes[active].textContent;
    const lang = LANGUAGES[active].label;
    clearTimeout(resetLabel);
    try {
      if (!navigator.clipboard) throw new Error('no clipboard');
      await navigator.clipboard.writeText(text);
      copy.textContent = 'Copied';
      copyStatus.textContent = `The ${lang} code is on the clipboard.`;
    } catch {
      // No clipboard (an insecure origin, a refusal): the code is selected for the user to copy.
      const selection = window.getSelection();
      selection.selectAllChildren(codes[active]);
      copyStatus.textContent = `Copying was refused: the ${lang} code is selected, press Ctrl+C (⌘C on a Mac) to copy it.`;
    }
    resetLabel = setTimeout(() => {
      copy.textContent = 'Copy';
      copyStatus.textContent = '';
    }, 4000);
  });

  const element = el(
    'section',
    { className: 'card code-card', 'aria-labelledby': 'code-heading' },
    el('div', { className: 'card-head' }, el('h2', { id: 'code-heading', textContent: 'Code' }), copy),
    el(
      'p',
      { className: 'help' },
      'Calls ',
      el('code', { textContent: `${model.runUrl}/runsync` }),
      ' with exactly the input in the form. Put your key in the ',
      el('code', { textContent: 'SERVICE_API_KEY' }),
      ' environment variable first.',
    ),
    tablist,
    panels,
    copyStatus,
  );
  return {
    element,
    update(input) {
      LANGUAGES.forEach((lang, i) => {
        codes[i].textContent = lang.make(model, input);
      });
    },
  };
}
