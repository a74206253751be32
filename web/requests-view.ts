// The account's file requests in the web app (issue 45): make one (title,
// how many files, how large, for how long, a password), see the open ones
// with their upload links and files received, close one.
import type { Api } from './api.js';
import { formatBytes, h } from './dom.js';

interface FileRequestItem {
  request_id: string;
  title: string | null;
  upload_link: string;
  max_files: number | null;
  max_file_size: number | null;
  expires_at: string | null;
  files_received: number;
  has_password: boolean;
}

const MiB = 1024 * 1024;

export function requestsView(api: Api, report: (err: unknown) => void) {
  const list = h('ul', { id: 'request-list', 'aria-label': 'Open file requests' });
  const field = (id: string, label: string, props: Record<string, string | number | boolean>) =>
    h('div', { class: 'field' }, h('label', { htmlFor: id }, label), h('input', { id, name: id, ...props }));
  const form = h(
    'form',
    {
      id: 'new-request',
      onsubmit: async (event) => {
        event.preventDefault();
        const value = (id: string) => (form.querySelector(`#${id}`) as HTMLInputElement).value.trim();
        const body: Record<string, unknown> = {};
        if (value('request-title')) body.title = value('request-title');
        if (value('request-max-files')) body.max_files = Number(value('request-max-files'));
        if (value('request-max-size')) body.max_file_size = Math.round(Number(value('request-max-size')) * MiB);
        if (value('request-days')) body.expires_in = Math.round(Number(value('request-days')) * 86400);
        if (value('request-password')) body.password = value('request-password');
        try {
          await api.call('POST', '/requests', body);
          form.reset();
          await reload();
        } catch (err) {
          report(err);
        }
      },
    },
    field('request-title', 'Title', { type: 'text', maxLength: 200 }),
    field('request-max-files', 'Most files', { type: 'number', min: 1, max: 10000 }),
    field('request-max-size', 'Largest file (MiB)', { type: 'number', min: 1 }),
    field('request-days', 'Open for (days)', { type: 'number', min: 1 }),
    field('request-password', 'Password', { type: 'password', autocomplete: 'new-password' }),
    h('button', { type: 'submit' }, 'Create request'),
  );
  const element = h('section', { id: 'requests', 'aria-labelledby': 'requests-title' }, h('h2', { id: 'requests-title' }, 'File requests'), form, list);

  function item(request: FileRequestItem): HTMLElement {
    const name = request.title ?? request.request_id;
    const limits = [
      `${request.files_received}${request.max_files === null ? '' : ` of ${request.max_files}`} received`,
      request.max_file_size === null ? '' : `at most ${formatBytes(request.max_file_size)} each`,
      request.expires_at ? `open until ${request.expires_at} UTC` : '',
      request.has_password ? 'password' : '',
    ].filter(Boolean);
    const close = h('button', { type: 'button', 'aria-label': `Close ${name}`, onclick: async () => {
      if (!confirm(`Close "${name}"? Its link stops taking files; the files it received stay.`)) return;
      try {
        await api.call('DELETE', `/requests/${request.request_id}`);
        await reload();
      } catch (err) {
        report(err);
      }
    } }, 'Close');
    return h('li', {}, h('strong', {}, name), ' ', h('a', { href: request.upload_link }, request.upload_link), h('p', {}, limits.join(', ')), close);
  }

  async function reload(): Promise<void> {
    try {
      const { requests } = await api.call<{ requests: FileRequestItem[] }>('GET', '/requests?limit=100');
      list.replaceChildren(...(requests.length ? requests.map(item) : [h('li', {}, 'No open requests.')]));
    } catch (err) {
      report(err);
    }
  }
  return { element, reload };
}
