// The upload page of a file request (/r/{token}, docs/file-requests.md):
// built from the web app's parts (Uppy's dashboard and tus, dom.ts, the
// stylesheet). No key: the link is the credential, and a password, when the
// request has one, is the browser's own Basic prompt, whose credentials it
// sends again with every request to the same origin.
import '@uppy/core/css/style.min.css';
import '@uppy/dashboard/css/style.min.css';
import './app.css';
import Uppy from '@uppy/core';
import Dashboard from '@uppy/dashboard';
import Tus from '@uppy/tus';
import { formatBytes, h } from './dom.js';

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

/** The API's own words for a refusal ({"error": {"message"}}), else tus-js-client's. */
function describe(error: Error & { originalResponse?: { getStatus(): number; getBody(): string } | null }): string {
  const response = error.originalResponse;
  if (!response) return error.message;
  try {
    const body = JSON.parse(response.getBody()) as { error?: { message?: string } };
    if (body.error?.message) return `${body.error.message} (${response.getStatus()})`;
  } catch {
    // not JSON: fall through
  }
  return `The server answered ${response.getStatus()}`;
}

const uppy = new Uppy({ autoProceed: true, allowMultipleUploadBatches: true })
  .use(Dashboard, {
    target,
    inline: true,
    width: '100%',
    height: 320,
    dragDropTarget: document.body,
    disableThumbnailGenerator: true,
    proudlyDisplayPoweredByUppy: false,
    showProgressDetails: true,
    hideProgressDetails: false,
  } as never)
  .use(Tus, {
    endpoint: endpoint!,
    retryDelays: [0, 1000, 3000, 5000, 10000],
    storeFingerprintForResuming: true,
    removeFingerprintOnSuccess: true,
    allowedMetaFields: ['name', 'type'],
    limit: 3,
  });
uppy.on('upload-success', (file) => {
  if (file) done.append(h('li', {}, `${file.name} (${formatBytes(file.size ?? 0)}): done`));
});
uppy.on('upload-error', (_file, error) => {
  errorBox.textContent = describe(error as never);
  errorBox.hidden = false;
});
