// The account's webhooks (issue 44's API, docs/webhooks.md): list them (URL,
// events, state), add one (a URL and the events it wants) whose signing
// secret is shown this once, rotate a secret, remove one (after a
// confirmation). Needs a key with webhooks:write; without it the section says so.
import type { Api } from './api.js';
import { WEBHOOK_EVENTS } from './api-names.js';
import { h } from './dom.js';
import { lacksScope } from './keys-view.js';
import { secretOnce } from './secret-once.js';

interface WebhookItem {
  webhook_id: string;
  url: string;
  events: string[];
  created_at: string;
  disabled: boolean;
  disabled_at: string | null;
  paused_until: string | null;
}

export function webhooksView(api: Api, report: (err: unknown) => void, onChange: () => void) {
  const list = h('ul', { id: 'webhook-list', 'aria-label': 'Webhooks' });
  const note = h('p', { class: 'note', hidden: true });
  const secretBox = h('div', { class: 'secret-slot' });
  const url = h('input', { id: 'webhook-url', name: 'webhook-url', type: 'url', required: true, maxLength: 2048, placeholder: 'https://example.com/hooks' });
  const boxes = WEBHOOK_EVENTS.map((event) => h('input', { type: 'checkbox', name: 'event', value: event, defaultChecked: true }));
  const form = h(
    'form',
    {
      id: 'new-webhook',
      onsubmit: async (event) => {
        event.preventDefault();
        const events = boxes.filter((box) => box.checked).map((box) => box.value);
        try {
          const { webhook } = await api.call<{ webhook: WebhookItem & { secret: string } }>('POST', '/webhooks', { url: url.value.trim(), events });
          form.reset();
          show(`Webhook for ${webhook.url} added; its signing secret:`, webhook.secret);
          await reload();
          onChange();
        } catch (err) {
          report(err);
        }
      },
    },
    h('div', { class: 'field' }, h('label', { htmlFor: 'webhook-url' }, 'Webhook URL'), url),
    h('fieldset', { class: 'scopes' },
      h('legend', {}, 'Events'),
      ...boxes.map((box) => h('label', { class: 'check' }, box, ` ${box.value}`))),
    h('button', { type: 'submit' }, 'Add webhook'),
  );
  const element = h('section', { id: 'webhooks', 'aria-labelledby': 'webhooks-title' },
    h('h2', { id: 'webhooks-title' }, 'Webhooks'), note, secretBox, list, h('h3', {}, 'New webhook'), form);

  const show = (title: string, secret: string) =>
    secretBox.replaceChildren(secretOnce('Webhook secret', title, secret, 'Copy secret', () => secretBox.replaceChildren()));

  function item(webhook: WebhookItem): HTMLElement {
    const state = webhook.disabled
      ? `disabled since ${webhook.disabled_at} UTC (deliveries kept failing)`
      : webhook.paused_until ? `paused until ${webhook.paused_until} UTC` : 'active';
    const rotate = h('button', { type: 'button', 'aria-label': `Rotate secret of ${webhook.url}`, onclick: async () => {
      if (!confirm(`Give ${webhook.url} a new signing secret? The old one signs too for 24 hours.`)) return;
      try {
        const { webhook: rotated } = await api.call<{ webhook: { secret: string } }>('POST', `/webhooks/${webhook.webhook_id}/rotate-secret`);
        show(`New signing secret for ${webhook.url}:`, rotated.secret);
      } catch (err) {
        report(err);
      }
    } }, 'Rotate secret');
    const remove = h('button', { type: 'button', class: 'danger', 'aria-label': `Remove ${webhook.url}`, onclick: async () => {
      if (!confirm(`Remove the webhook for ${webhook.url}? Its undelivered messages go with it.`)) return;
      try {
        await api.call('DELETE', `/webhooks/${webhook.webhook_id}`);
        await reload();
        onChange();
      } catch (err) {
        report(err);
      }
    } }, 'Remove');
    return h('li', { class: 'webhook' },
      h('strong', { class: 'webhook-url' }, webhook.url),
      h('p', {}, `${webhook.events.join(', ')} · added ${webhook.created_at} UTC · ${state}`),
      rotate, ' ', remove);
  }

  async function reload(): Promise<void> {
    try {
      const { webhooks } = await api.call<{ webhooks: WebhookItem[] }>('GET', '/webhooks');
      list.replaceChildren(...(webhooks.length ? webhooks.map(item) : [h('li', {}, 'No webhooks.')]));
      note.hidden = true;
    } catch (err) {
      if (!lacksScope(err)) return report(err);
      note.textContent = `This key cannot manage webhooks (${(err as Error).message.replace(/^403: /, '')}).`;
      note.hidden = false;
      list.replaceChildren();
      form.hidden = true;
    }
  }
  return { element, reload };
}
