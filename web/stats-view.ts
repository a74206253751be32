// The account's figures and its plan's limits, as bars where a limit exists.
import type { Api, Stats } from './api.js';
import { bar, formatBytes, h } from './dom.js';

export function statsView(api: Api, report: (err: unknown) => void) {
  const content = h('div', { class: 'stats-content' });
  const element = h('section', { id: 'account', 'aria-labelledby': 'account-title' }, h('h2', { id: 'account-title' }, 'Account'), content);
  async function reload(): Promise<void> {
    try {
      const { stats, limits, plan } = await api.call<Stats>('GET', '/stats');
      const count = (n: number) => n.toLocaleString('en');
      content.replaceChildren(
        h('p', {}, `Plan: ${plan}`),
        h('p', {}, `Files: ${count(stats.total_files)}`),
        bar('Storage used', stats.total_size, limits.max_total_size, formatBytes),
        h('p', {}, `Largest file: ${limits.max_file_size === null ? 'no limit' : formatBytes(limits.max_file_size)}`),
        h('p', {}, `Uploads per day: ${limits.daily_uploads === null ? 'no limit' : count(limits.daily_uploads)}`),
      );
    } catch (err) {
      report(err);
    }
  }
  return { element, reload };
}
