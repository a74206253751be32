// A few lines instead of a framework: elements built with properties (never
// HTML strings from data, so a filename cannot inject markup).
type Props = Record<string, string | number | boolean | ((event: Event) => void) | undefined>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, props: Props = {}, ...children: (Node | string | null | undefined | false)[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === false) continue;
    if (typeof value === 'function') el.addEventListener(name.replace(/^on/, ''), value);
    else if (name === 'class') el.className = String(value);
    else if (name in el && !name.startsWith('aria') && !name.startsWith('data')) (el as unknown as Record<string, unknown>)[name] = value;
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) if (child !== null && child !== undefined && child !== false) el.append(child);
  return el;
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${UNITS[unit]}`;
}

/** A labelled bar (a <meter>, which screen readers announce) or, without a limit, just the figure. */
export function bar(label: string, used: number, limit: number | null, format: (n: number) => string): HTMLElement {
  const id = `bar-${label.replace(/\W+/g, '-').toLowerCase()}`;
  if (limit === null) return h('p', {}, `${label}: ${format(used)} (no limit)`);
  return h(
    'div',
    { class: 'bar' },
    h('label', { htmlFor: id }, `${label}: ${format(used)} of ${format(limit)}`),
    h('meter', { id, min: 0, max: limit, value: Math.min(used, limit), high: limit * 0.9 }),
  );
}
