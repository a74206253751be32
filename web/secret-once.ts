// A secret the API answers once (a new key's, a webhook's): shown in a
// labelled box with a copy button until "Done"; kept nowhere else, so a
// reload or sign-out forgets it as the API does.
import { h } from './dom.js';

export function secretOnce(region: string, title: string, secret: string, copyLabel: string, done: () => void): HTMLElement {
  const code = h('code', { class: 'secret' }, secret);
  const copy = h('button', { type: 'button', onclick: async () => {
    try {
      await navigator.clipboard.writeText(secret);
      copy.textContent = 'Copied';
    } catch {
      // No clipboard (an insecure origin, a refused permission): select it for Ctrl+C.
      getSelection()?.selectAllChildren(code);
      copy.textContent = 'Press Ctrl+C';
    }
    setTimeout(() => (copy.textContent = copyLabel), 2000);
  } }, copyLabel);
  return h('section', { class: 'new-secret', 'aria-label': region },
    h('p', {}, h('strong', {}, `${title} `), 'Copy it now: this is the only time it is shown.'),
    code, ' ', copy, ' ',
    h('button', { type: 'button', onclick: done }, 'Done'));
}
