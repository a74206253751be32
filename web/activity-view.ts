// The account's audit trail (issue 57's GET /api/v1/audit): what changed the
// account, newest first, a page at a time, filtered by action; who did it
// (the key by name, a file request's outsider, the operator) and from which
// network. Needs a key with audit:read; without it the section says so.
import type { Api } from './api.js';
import { AUDIT_ACTIONS } from './api-names.js';
import { h } from './dom.js';
import { lacksScope } from './keys-view.js';

interface AuditEvent {
  action: string;
  subject: string;
  actor: string;
  key_id: string | null;
  key_name: string | null;
  request_id: string | null;
  client_address: string | null;
  created_at: string;
}

interface AuditPage {
  events: AuditEvent[];
  pagination: { page: number; limit: number; total: number; pages: number };
}

const PAGE_SIZE = 20;

function by(event: AuditEvent): string {
  switch (event.actor) {
    case 'key':
      return event.key_name ? `key "${event.key_name}"` : `key ${event.key_id ?? ''}`.trim();
    case 'request':
      return `file request ${event.request_id ?? ''}`.trim();
    case 'link':
      return 'someone with the link';
    default:
      return event.actor;
  }
}

export function activityView(api: Api, report: (err: unknown) => void) {
  let page = 1;
  const body = h('tbody');
  const note = h('p', { class: 'note', hidden: true });
  const status = h('p', { class: 'pager-status', 'aria-live': 'polite' });
  // Newest first, so the pages go to newer and older events (and are named apart from the files' pager).
  const previous = h('button', { type: 'button', onclick: () => go(page - 1) }, 'Newer events');
  const next = h('button', { type: 'button', onclick: () => go(page + 1) }, 'Older events');
  const filter = h('select', { id: 'activity-action', name: 'activity-action', onchange: () => go(1) },
    h('option', { value: '' }, 'All actions'),
    ...AUDIT_ACTIONS.map((action) => h('option', { value: action }, action)));
  const element = h(
    'section',
    { id: 'activity', 'aria-labelledby': 'activity-title' },
    h('h2', { id: 'activity-title' }, 'Activity'),
    h('div', { class: 'field filter' }, h('label', { htmlFor: 'activity-action' }, 'Action'), filter),
    note,
    h('table', {},
      h('thead', {}, h('tr', {}, ...['Time (UTC)', 'Action', 'Subject', 'By', 'From'].map((title) => h('th', { scope: 'col' }, title)))),
      body),
    h('nav', { class: 'pager', 'aria-label': 'Pages of activity' }, previous, status, next),
  );

  async function go(to: number): Promise<void> {
    const action = filter.value ? `&action=${encodeURIComponent(filter.value)}` : '';
    try {
      const result = await api.call<AuditPage>('GET', `/audit?page=${to}&limit=${PAGE_SIZE}${action}`);
      page = to;
      note.hidden = true;
      body.replaceChildren(...(result.events.length ? result.events.map(row) : [h('tr', {}, h('td', { colSpan: 5 }, 'Nothing yet.'))]));
      const { pages, total } = result.pagination;
      status.textContent = `Page ${page} of ${Math.max(1, pages)} (${total} ${total === 1 ? 'event' : 'events'})`;
      previous.disabled = page <= 1;
      next.disabled = page >= pages;
    } catch (err) {
      if (!lacksScope(err)) return report(err);
      note.textContent = `This key cannot read the activity (${(err as Error).message.replace(/^403: /, '')}).`;
      note.hidden = false;
      body.replaceChildren();
      status.textContent = '';
      previous.disabled = next.disabled = true;
    }
  }

  const row = (event: AuditEvent): HTMLElement =>
    h('tr', { class: 'event' },
      h('td', { 'data-label': 'Time (UTC)' }, event.created_at),
      h('td', { 'data-label': 'Action' }, event.action),
      h('td', { 'data-label': 'Subject' }, event.subject),
      h('td', { 'data-label': 'By' }, by(event)),
      h('td', { 'data-label': 'From' }, event.client_address ?? ''));

  return { element, reload: () => go(page) };
}
