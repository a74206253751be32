import { encodeExtended, format } from 'content-disposition';

/**
 * Letters and punctuation that Unicode decomposition leaves non-ASCII but
 * that have a customary ASCII spelling; everything else outside ASCII becomes `_`.
 */
const ASCII_SPELLING: Record<string, string> = {
  '\u2010': '-', '\u2011': '-', '\u2012': '-', '\u2013': '-', '\u2014': '-', '\u2015': '-', '\u2212': '-', // hyphens, dashes, minus
  '\u2018': "'", '\u2019': "'", '\u201A': "'", '\u201B': "'", '\u2032': "'", '\u2039': "'", '\u203A': "'", // single quotes, prime
  '\u201C': "'", '\u201D': "'", '\u201E': "'", '\u201F': "'", '\u2033': "'", '\u00AB': "'", '\u00BB': "'", // double quotes, guillemets
  '\u2022': '-', '\u00B7': '.', '\u00D7': 'x',
  '\u00DF': 'ss', '\u1E9E': 'SS', '\u00C6': 'AE', '\u00E6': 'ae', '\u0152': 'OE', '\u0153': 'oe',
  '\u00D8': 'O', '\u00F8': 'o', '\u0141': 'L', '\u0142': 'l', '\u0110': 'D', '\u0111': 'd', '\u00D0': 'D', '\u00F0': 'd',
  '\u00DE': 'Th', '\u00FE': 'th', '\u0131': 'i',
};

/**
 * A readable ASCII spelling of a file name, for clients that read only the
 * plain `filename` parameter (curl -OJ does): `résumé 2026 – final.pdf`
 * becomes `resume 2026 - final.pdf` rather than `r?sum? 2026 ? final.pdf`.
 * Compatibility decomposition (NFKD) splits accents off their letters and
 * spells out ligatures and full-width forms; the accents are dropped, common
 * punctuation gets its ASCII twin, and whatever is left (CJK, emoji) is `_`,
 * one per character. Double quotes become `'`: curl (7.88) ends a quoted
 * name at an escaped quote and then falls back to the URL's last segment.
 */
export function asciiFilename(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .replace(/[^\x20-\x7e]/gu, (c) => ASCII_SPELLING[c] ?? '_')
    .replaceAll('"', "'");
}

/**
 * `attachment` with the ASCII spelling as `filename` and the exact name,
 * UTF-8, as `filename*`, which clients that understand it prefer (RFC 6266).
 * Always both, even for ASCII names, so every client gets the same answer.
 */
export function attachment(filename: string): string {
  return format({ type: 'attachment', parameters: { filename: asciiFilename(filename), 'filename*': encodeExtended(filename) } });
}
