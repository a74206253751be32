// One file's links (issue 23's API): list them, create one with rules,
// revoke one. Revoking the primary rotates it: the API answers the new one.
import type { Api, LinkItem } from './api.js';
import { h } from './dom.js';

export function linksPanel(api: Api, fileId: number, filename: string, onChange: () => void, report: (err: unknown) => void): HTMLElement {
  const list = h('ul', { class: 'links' });
  const panel = h('section', { class: 'links-panel', 'aria-label': `Links of ${filename}` });

  async function load(): Promise<void> {
    const { links } = await api.call<{ links: LinkItem[] }>('GET', `/files/${fileId}/links`);
    list.replaceChildren(...links.map(linkRow));
  }

  function linkRow(link: LinkItem): HTMLElement {
    const rules = [
      link.primary ? 'primary' : null,
      link.expires_at ? `expires ${link.expires_at} UTC` : 'no expiry',
      link.max_downloads === null ? 'no download limit' : `${Math.max(0, link.max_downloads - link.download_count)} of ${link.max_downloads} downloads left`,
      `${link.download_count} downloads`,
      link.password_protected ? 'password' : null,
    ].filter(Boolean);
    const revoke = h('button', {
      type: 'button',
      'aria-label': `${link.primary ? 'Rotate' : 'Revoke'} link ${link.public_link}`,
      onclick: async () => {
        const question = link.primary ? 'Revoke the primary link? The file gets a new one; the old one stops working.' : 'Revoke this link? It stops working.';
        if (!confirm(question)) return;
        try {
          await api.call('DELETE', `/files/${fileId}/links/${link.link_id}`);
          await load();
          // The file's public link changed: the list shows the new one.
          if (link.primary) onChange();
        } catch (err) {
          report(err);
        }
      },
    }, link.primary ? 'Rotate (revoke primary)' : 'Revoke');
    return h('li', { class: 'link' }, h('a', { href: link.public_link }, link.public_link), h('span', { class: 'rules' }, ` ${rules.join(' · ')} `), revoke);
  }

  const id = `f${fileId}`;
  const expires = h('input', { id: `${id}-expires`, type: 'number', min: 1, inputMode: 'numeric' });
  const maxDownloads = h('input', { id: `${id}-max`, type: 'number', min: 1, inputMode: 'numeric' });
  const password = h('input', { id: `${id}-password`, type: 'password', autocomplete: 'new-password' });
  const form = h(
    'form',
    {
      class: 'new-link',
      onsubmit: async (event) => {
        event.preventDefault();
        const body: Record<string, string | number> = {};
        if (expires.value) body.expires_in = Math.round(Number(expires.value) * 3600);
        if (maxDownloads.value) body.max_downloads = Number(maxDownloads.value);
        if (password.value) body.password = password.value;
        try {
          await api.call('POST', `/files/${fileId}/links`, body);
          form.reset();
          await load();
        } catch (err) {
          report(err);
        }
      },
    },
    h('div', {}, h('label', { htmlFor: expires.id }, 'Expires in (hours)'), expires),
    h('div', {}, h('label', { htmlFor: maxDownloads.id }, 'Max downloads'), maxDownloads),
    h('div', {}, h('label', { htmlFor: password.id }, 'Password'), password),
    h('button', { type: 'submit' }, 'Create link'),
  );
  panel.append(h('h3', {}, `Links of ${filename}`), list, form);
  load().catch(report);
  return panel;
}
