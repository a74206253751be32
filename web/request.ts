// The upload page of a file request (/r/{token}, docs/file-requests.md):
// built from the web app's parts (Uppy's dashboard and tus, dom.ts, the
// stylesheet). No key: the link is the credential, and a password, when the
// request has one, is the browser's own Basic prompt, whose credentials it
// sends again with every request to the same origin.
import '@uppy/core/css/style.min.css';
import '@uppy/dashboard/css/style.min.css';
import './app.css';
import { formatBytes, h } from './dom.js';
import { startUploader } from './uploader.js';

const root = document.getElementById('request')!;
const { endpoint, title, maxFiles, maxFileSize, expiresAt } = root.dataset;
const errorBox = h('div', { id: 'error', role: 'alert', class: 'error', hidden: true });
const done = h('ul', { id: 'done', 'aria-label': 'Files received' });

const limits = [
  maxFiles ? `up to ${maxFiles} file${maxFiles === '1' ? '' : 's'}` : '',
  maxFileSize ? `at most ${formatBytes(Number(maxFileSize))} each` : '',
  expiresAt ? `open until ${expiresAt} UTC` : '',
].filter(Boolean);

const target = h('div', { id: 'uploader' });
root.append(
  h('h1', {}, title || 'Send files'),
  h('p', { id: 'limits' }, limits.length ? `This request takes ${limits.join(', ')}.` : 'Choose files or drop them anywhere on this page.'),
  errorBox,
  target,
  h('h2', {}, 'Sent'),
  done,
);

startUploader(target, {
  endpoint: endpoint!,
  // The link's own path: /r/{token}/uploads -> /r/{token}/files.
  plainEndpoint: endpoint!.replace(/\/uploads$/, '/files'),
  onUploaded: (file) => done.append(h('li', {}, `${file.name} (${formatBytes(file.size)}): done`)),
  report: (err) => {
    errorBox.textContent = err instanceof Error ? err.message : String(err);
    errorBox.hidden = false;
  },
});
