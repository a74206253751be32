// The web app at /app (docs/web-app.md). The API key lives in
// sessionStorage only: gone when the tab closes, never in a URL, sent only
// to our own API as `Authorization: Bearer`.
import '@uppy/core/css/style.min.css';
import '@uppy/dashboard/css/style.min.css';
import './app.css';
import { API, Api, ApiError, type Stats } from './api.js';
import { h } from './dom.js';
import { activityView } from './activity-view.js';
import { filesView } from './files-view.js';
import { keysView } from './keys-view.js';
import { requestsView } from './requests-view.js';
import { statsView } from './stats-view.js';
import { webhooksView } from './webhooks-view.js';
import { startUploader } from './uploader.js';

const KEY = 'dropstream.apiKey';
const root = document.getElementById('app')!;
const errorBox = h('div', { id: 'error', role: 'alert', class: 'error', hidden: true });

/** Set while signed in: ends the session (forgets the key, stops uploads). */
let endSession: (() => void) | undefined;

function report(err: unknown): void {
  // A key the API no longer takes (rotated, account removed): back to the sign-in form, with the API's words.
  if (err instanceof ApiError && err.status === 401 && endSession) {
    endSession();
    signInView();
  }
  errorBox.textContent = err instanceof Error ? err.message : String(err);
  errorBox.hidden = false;
}

function clearError(): void {
  errorBox.hidden = true;
  errorBox.textContent = '';
}

function signInView(): void {
  const input = h('input', { id: 'api-key', name: 'api-key', type: 'password', autocomplete: 'off', required: true, spellcheck: false });
  const button = h('button', { type: 'submit' }, 'Sign in');
  const form = h(
    'form',
    {
      id: 'sign-in',
      onsubmit: async (event) => {
        event.preventDefault();
        clearError();
        button.disabled = true;
        const api = new Api(input.value.trim());
        try {
          // The key is kept only once the API accepted it.
          await api.call<Stats>('GET', '/stats');
          sessionStorage.setItem(KEY, input.value.trim());
          appView(api);
        } catch (err) {
          report(err);
        } finally {
          button.disabled = false;
        }
      },
    },
    h('h1', {}, 'dropstream'),
    h('p', {}, 'Sign in with an API key of your account. It is kept in this tab only, until you sign out or close it.'),
    h('label', { htmlFor: 'api-key' }, 'API key'),
    input,
    button,
  );
  root.replaceChildren(h('main', { class: 'sign-in' }, form, errorBox));
  input.focus();
}

function appView(api: Api): void {
  clearError();
  const stats = statsView(api, report);
  const activity = activityView(api, report);
  const files = filesView(api, report, () => {
    void stats.reload();
    void activity.reload();
  });
  const requests = requestsView(api, report);
  const keys = keysView(api, report, () => void activity.reload());
  const webhooks = webhooksView(api, report, () => void activity.reload());
  const uploads = h('div', { id: 'uploader' });
  const signOut = h('button', { type: 'button', id: 'sign-out', onclick: () => {
    endSession?.();
    clearError();
    signInView();
  } }, 'Sign out');
  root.replaceChildren(
    h('header', {}, h('h1', {}, 'dropstream'), signOut),
    h('main', {},
      errorBox,
      h('section', { id: 'upload', 'aria-labelledby': 'upload-title' }, h('h2', { id: 'upload-title' }, 'Upload'), uploads),
      files.element,
      requests.element,
      keys.element,
      webhooks.element,
      activity.element,
      stats.element),
  );
  const stopUploader = startUploader(uploads, {
    endpoint: `${API}/uploads`,
    plainEndpoint: `${API}/files/upload`,
    headers: { Authorization: api.authorization },
    onUploaded: () => {
      void files.reload();
      void stats.reload();
      void activity.reload();
    },
    report,
  });
  endSession = () => {
    endSession = undefined;
    sessionStorage.removeItem(KEY);
    stopUploader();
  };
  void files.reload();
  void requests.reload();
  void keys.reload();
  void webhooks.reload();
  void activity.reload();
  void stats.reload();
}

const saved = sessionStorage.getItem(KEY);
if (saved) appView(new Api(saved));
else signInView();
