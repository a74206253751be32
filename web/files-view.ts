// The account's files, newest first, a page at a time as the API pages
// them: name, size, date, downloads, the public link with "Copy link" and a
// QR code, its links, and delete (after a confirmation).
import qrcode from 'qrcode-generator';
import type { Api, FileItem, FilePage } from './api.js';
import { formatBytes, h } from './dom.js';
import { linksPanel } from './links-view.js';

const PAGE_SIZE = 10;

export interface FilesView {
  element: HTMLElement;
  reload(): Promise<void>;
}

/** A QR code as SVG: vector, no image request, no data: URL for the CSP to allow. */
function qr(text: string): SVGElement {
  const code = qrcode(0, 'M');
  code.addData(text);
  code.make();
  const svg = new DOMParser().parseFromString(code.createSvgTag({ cellSize: 3, margin: 2, scalable: true }), 'image/svg+xml').documentElement;
  const node = document.importNode(svg, true) as unknown as SVGElement;
  node.setAttribute('role', 'img');
  node.setAttribute('aria-label', `QR code of ${text}`);
  return node;
}

export function filesView(api: Api, report: (err: unknown) => void, onChange: () => void): FilesView {
  let page = 1;
  const body = h('tbody');
  const status = h('p', { class: 'pager-status', 'aria-live': 'polite' });
  const previous = h('button', { type: 'button', onclick: () => go(page - 1) }, 'Previous page');
  const next = h('button', { type: 'button', onclick: () => go(page + 1) }, 'Next page');
  const element = h(
    'section',
    { id: 'files', 'aria-labelledby': 'files-title' },
    h('h2', { id: 'files-title' }, 'Files'),
    h('table', {},
      h('thead', {}, h('tr', {}, ...['Name', 'Size', 'Uploaded (UTC)', 'Downloads', 'Link', ''].map((title) => h('th', { scope: 'col' }, title)))),
      body),
    h('nav', { class: 'pager', 'aria-label': 'Pages of files' }, previous, status, next),
  );

  async function go(to: number): Promise<void> {
    try {
      const result = await api.call<FilePage>('GET', `/files?page=${to}&limit=${PAGE_SIZE}`);
      // A page emptied by a delete: step back to the last one there is.
      if (result.files.length === 0 && to > 1 && result.pagination.pages < to) return go(Math.max(1, result.pagination.pages));
      page = to;
      body.replaceChildren(...(result.files.length ? result.files.map(row) : [h('tr', {}, h('td', { colSpan: 6 }, 'No files yet: upload one above.'))]));
      const { pages, total } = result.pagination;
      status.textContent = `Page ${page} of ${Math.max(1, pages)} (${total} files)`;
      previous.disabled = page <= 1;
      next.disabled = page >= pages;
    } catch (err) {
      report(err);
    }
  }

  function row(file: FileItem): HTMLElement {
    const linksCell = h('td', { colSpan: 6 });
    const linksRow = h('tr', { class: 'links-row', hidden: true }, linksCell);
    const qrBox = h('div', { class: 'qr', hidden: true });
    const copy = h('button', {
      type: 'button',
      'aria-label': `Copy link of ${file.filename}`,
      onclick: async () => {
        try {
          await navigator.clipboard.writeText(file.public_link);
          copy.textContent = 'Copied';
        } catch {
          // No clipboard (an insecure origin, a refused permission): select the link instead.
          getSelection()?.selectAllChildren(anchor);
          copy.textContent = 'Press Ctrl+C';
        }
        setTimeout(() => (copy.textContent = 'Copy link'), 2000);
      },
    }, 'Copy link');
    const anchor = h('a', { href: file.public_link, class: 'public-link' }, file.public_link);
    const tr = h(
      'tr',
      { class: 'file', 'data-file-id': file.file_id },
      h('td', { class: 'name' }, file.filename),
      h('td', { 'data-label': 'Size' }, formatBytes(file.size)),
      h('td', { 'data-label': 'Uploaded (UTC)' }, file.upload_date),
      h('td', { 'data-label': 'Downloads' }, String(file.download_count)),
      h('td', { class: 'link-cell' }, anchor, ' ', copy, ' ',
        h('button', { type: 'button', 'aria-label': `QR code of ${file.filename}`, 'aria-expanded': 'false', onclick: (event) => {
          if (!qrBox.firstChild) qrBox.append(qr(file.public_link));
          qrBox.hidden = !qrBox.hidden;
          (event.currentTarget as HTMLElement).setAttribute('aria-expanded', String(!qrBox.hidden));
        } }, 'QR'),
        qrBox),
      h('td', { class: 'actions' },
        h('button', { type: 'button', 'aria-label': `Links of ${file.filename}`, onclick: () => {
          linksRow.hidden = !linksRow.hidden;
          if (!linksRow.hidden) linksCell.replaceChildren(linksPanel(api, file.file_id, file.filename, () => void go(page), report));
        } }, 'Links'),
        ' ',
        h('button', { type: 'button', class: 'danger', 'aria-label': `Delete ${file.filename}`, onclick: async () => {
          if (!confirm(`Delete ${file.filename}? Its links stop working.`)) return;
          try {
            await api.call('DELETE', `/files/${file.file_id}`);
            await go(page);
            onChange();
          } catch (err) {
            report(err);
          }
        } }, 'Delete')),
    );
    const fragment = document.createDocumentFragment();
    fragment.append(tr, linksRow);
    return fragment as unknown as HTMLElement;
  }

  return { element, reload: () => go(page) };
}
