// The account's API keys (issue 57's keys API): list them (name, scopes,
// prefix, dates), make one with a name, scopes and an optional expiry, whose
// secret is shown this once with a copy button, and revoke one (after a
// confirmation). Needs a key with keys:write; without it the section says so.
import { ApiError, type Api } from './api.js';
import { SCOPES } from './api-names.js';
import { h } from './dom.js';
import { secretOnce } from './secret-once.js';

export interface KeyItem {
  key_id: string;
  name: string | null;
  scopes: string[];
  prefix: string;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  allowed_cidrs: string[] | null;
  current: boolean;
}

const DAY = 86_400;

/** A section's own note for a key without the scope it needs: not an error of the page. */
export function lacksScope(err: unknown): boolean {
  return err instanceof ApiError && err.status === 403 && err.code === 'insufficient_scope';
}

export function keysView(api: Api, report: (err: unknown) => void, onChange: () => void) {
  const body = h('tbody');
  const note = h('p', { class: 'note', hidden: true });
  const secretBox = h('div', { class: 'secret-slot' });
  const name = h('input', { id: 'key-name', name: 'key-name', type: 'text', required: true, maxLength: 100, autocomplete: 'off' });
  const days = h('input', { id: 'key-days', name: 'key-days', type: 'number', min: 1 });
  const full = h('input', { type: 'checkbox', id: 'scope-full', value: '*', onchange: () => {
    for (const box of boxes) box.disabled = full.checked;
  } });
  const boxes = SCOPES.map((scope) => h('input', { type: 'checkbox', id: `scope-${scope.replace(':', '-')}`, name: 'scope', value: scope }));
  const form = h(
    'form',
    {
      id: 'new-key',
      onsubmit: async (event) => {
        event.preventDefault();
        const scopes = full.checked ? ['*'] : boxes.filter((box) => box.checked).map((box) => box.value);
        const request: Record<string, unknown> = { name: name.value.trim(), scopes };
        if (days.value.trim()) request.expires_in = Math.round(Number(days.value) * DAY);
        try {
          const { key } = await api.call<{ key: KeyItem & { api_key: string } }>('POST', '/keys', request);
          form.reset();
          for (const box of boxes) box.disabled = false;
          showSecret(key);
          await reload();
          onChange();
        } catch (err) {
          report(err);
        }
      },
    },
    h('div', { class: 'field' }, h('label', { htmlFor: 'key-name' }, 'Key name'), name),
    h('fieldset', { class: 'scopes' },
      h('legend', {}, 'Scopes'),
      h('label', { class: 'check' }, full, ' Full key (every scope, also later ones)'),
      ...boxes.map((box) => h('label', { class: 'check' }, box, ` ${box.value}`))),
    h('div', { class: 'field' }, h('label', { htmlFor: 'key-days' }, 'Expires in (days)'), days),
    h('button', { type: 'submit' }, 'Create key'),
  );
  const element = h(
    'section',
    { id: 'keys', 'aria-labelledby': 'keys-title' },
    h('h2', { id: 'keys-title' }, 'Keys'),
    note,
    secretBox,
    h('table', {},
      h('thead', {}, h('tr', {}, ...['Name', 'Scopes', 'Prefix', 'Created (UTC)', 'Expires (UTC)', 'Last used (UTC)', ''].map((title) => h('th', { scope: 'col' }, title)))),
      body),
    h('h3', {}, 'New key'),
    form,
  );

  /** The secret, this once: it is in no list, and Done (or leaving the page) forgets it. */
  function showSecret(key: KeyItem & { api_key: string }): void {
    secretBox.replaceChildren(secretOnce('New key', `Key "${key.name ?? key.prefix}" made; only its hash is kept.`, key.api_key, 'Copy key', () => secretBox.replaceChildren()));
  }

  function row(key: KeyItem): HTMLElement {
    const label = key.name ?? `(no name) ${key.prefix}`;
    const scopes = key.scopes.includes('*') ? 'full' : key.scopes.join(', ');
    const revoke = h('button', { type: 'button', class: 'danger', 'aria-label': `Revoke ${label}`, onclick: async () => {
      const question = key.current ? `Revoke "${label}", the key this page is signed in with? The page signs out.` : `Revoke "${label}"? Whatever uses it gets 401 from now on.`;
      if (!confirm(question)) return;
      try {
        await api.call('DELETE', `/keys/${key.key_id}`);
        await reload();
        onChange();
      } catch (err) {
        report(err);
      }
    } }, 'Revoke');
    return h('tr', { class: 'key' },
      h('td', { class: 'name' }, label, key.current ? h('span', { class: 'tag' }, ' (this key)') : null),
      h('td', { 'data-label': 'Scopes' }, scopes, key.allowed_cidrs ? ` from ${key.allowed_cidrs.join(', ')}` : ''),
      h('td', { 'data-label': 'Prefix' }, key.prefix),
      h('td', { 'data-label': 'Created (UTC)' }, key.created_at),
      h('td', { 'data-label': 'Expires (UTC)' }, key.expires_at ?? 'never'),
      h('td', { 'data-label': 'Last used (UTC)' }, key.last_used_at ?? 'never'),
      h('td', { class: 'actions' }, revoke));
  }

  async function reload(): Promise<void> {
    try {
      const { keys } = await api.call<{ keys: KeyItem[] }>('GET', '/keys');
      body.replaceChildren(...keys.map(row));
      note.hidden = true;
    } catch (err) {
      if (!lacksScope(err)) return report(err);
      // A key without keys:write: the section says why it is empty rather than alarming the page.
      note.textContent = `This key cannot manage keys (${(err as Error).message.replace(/^403: /, '')}).`;
      note.hidden = false;
      body.replaceChildren();
      form.hidden = true;
    }
  }
  return { element, reload };
}
