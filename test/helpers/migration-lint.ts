// Expand, then contract (docs/development.md, Migrations): during a rolling
// upgrade the previous release's instances serve on the schema the new
// release's migrations made, so a migration added since the last release may
// only add what the old code can ignore. This reads the SQL of the release's
// migrations into a model of what the release knows (tables, their columns,
// unique indexes and constraints) and flags each later statement that would
// break an old instance that uses them:
//
//   contract (the old code reads or writes what goes away or changes shape):
//     DROP TABLE, DROP COLUMN, RENAME, ALTER COLUMN ... TYPE, DROP CONSTRAINT,
//     DROP INDEX of a unique index (ON CONFLICT names it), TRUNCATE, and any
//     other DROP of an object the new migrations did not create themselves;
//   compat (the old code's writes may now fail, or its reads meet values it
//     does not know): SET NOT NULL, DROP DEFAULT, ADD COLUMN ... NOT NULL
//     without DEFAULT, ADD CONSTRAINT (CHECK, UNIQUE, PRIMARY KEY, EXCLUDE, or
//     a FOREIGN KEY over columns the release has), CREATE UNIQUE INDEX over
//     columns the release has, ALTER TYPE ... ADD VALUE.
//
// Statements on tables the release does not know are never flagged: no old
// instance touches them. A flagged statement passes when a comment in it (or
// right above it) says why it is safe:
//
//   -- contract: files.link_token unused since 0.2.0
//       a removal whose thing no release from 0.2.0 on uses; the version must
//       be the last release's or older (the old instances of a rolling
//       upgrade from it never touch it);
//   -- upgrade-safe: <why>
//       any other flagged statement (a constraint the old code cannot
//       violate, a column dropped that was added after the last release).
//
// It is a lint: SQL it cannot read passes, and what the old code does with
// data (not shape) is for the upgrade test (test/upgrade/) to find.

export interface MigrationFile {
  name: string;
  sql: string;
}

export interface Finding {
  migration: string;
  /** The statement, whitespace collapsed, cut at 120 characters. */
  statement: string;
  kind: 'contract' | 'compat';
  why: string;
}

interface Statement {
  /** Lowercased, quotes and comments removed, string literals emptied, whitespace collapsed. */
  text: string;
  /** As written, whitespace collapsed (for messages). */
  raw: string;
  /** The text of every `--` and block comment inside it or right above it. */
  comments: string[];
}

/** Splits SQL into statements at top-level `;`, aware of quotes, dollar quotes and comments. */
export function statements(sql: string): Statement[] {
  const out: Statement[] = [];
  let text = '';
  let raw = '';
  let comments: string[] = [];
  const flush = () => {
    const collapsed = text.replace(/\s+/g, ' ').trim();
    if (collapsed) out.push({ text: collapsed, raw: raw.replace(/\s+/g, ' ').trim(), comments });
    text = '';
    raw = '';
    comments = [];
  };
  for (let i = 0; i < sql.length; ) {
    const rest = sql.slice(i);
    if (rest.startsWith('--')) {
      const end = sql.indexOf('\n', i);
      const stop = end === -1 ? sql.length : end;
      comments.push(sql.slice(i + 2, stop).trim());
      text += ' ';
      i = stop;
      continue;
    }
    if (rest.startsWith('/*')) {
      const end = sql.indexOf('*/', i + 2);
      const stop = end === -1 ? sql.length : end + 2;
      comments.push(sql.slice(i + 2, end === -1 ? sql.length : end).trim());
      text += ' ';
      i = stop;
      continue;
    }
    const ch = sql[i]!;
    if (ch === "'") {
      // A string literal, '' inside it escaping a quote: kept as '' so data never reads as keywords.
      let j = i + 1;
      while (j < sql.length && !(sql[j] === "'" && sql[j + 1] !== "'")) j += sql[j] === "'" ? 2 : 1;
      raw += sql.slice(i, j + 1);
      text += "''";
      i = j + 1;
      continue;
    }
    if (ch === '"') {
      const j = sql.indexOf('"', i + 1);
      const stop = j === -1 ? sql.length : j;
      const name = sql.slice(i + 1, stop);
      raw += sql.slice(i, stop + 1);
      text += name.toLowerCase();
      i = stop + 1;
      continue;
    }
    const dollar = /^\$([A-Za-z_]*)\$/.exec(rest);
    if (dollar) {
      const end = sql.indexOf(dollar[0], i + dollar[0].length);
      const stop = end === -1 ? sql.length : end + dollar[0].length;
      raw += sql.slice(i, stop);
      text += ' $body$ ';
      i = stop;
      continue;
    }
    if (ch === ';') {
      flush();
      i++;
      continue;
    }
    raw += ch;
    text += ch.toLowerCase();
    i++;
  }
  flush();
  return out;
}

/** Splits at commas outside parentheses. */
function topLevel(list: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of list) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(current.trim());
      current = '';
    } else current += ch;
  }
  if (current.trim()) parts.push(current.trim());
  return parts;
}

const NAME = '([a-z_][a-z0-9_$]*)';
/** A possibly schema-qualified name; the schema is dropped (everything here lives in one). */
const QNAME = `(?:[a-z_][a-z0-9_$]*\\.)?${NAME}`;
const columnsIn = (list: string) => list.split(',').map((c) => c.trim().split(/\s+/)[0]!.replace(/[()]/g, '')).filter(Boolean);

/** What a set of migrations leaves: tables with their columns, unique indexes and constraints, other objects by name. */
export class SchemaModel {
  readonly tables = new Map<string, Set<string>>();
  /** Unique indexes and constraints (primary keys included), by name. */
  readonly unique = new Set<string>();
  readonly constraints = new Set<string>();
  readonly indexes = new Set<string>();
  /** Types, sequences, functions, views, ...: anything else a CREATE names. */
  readonly others = new Set<string>();

  apply(sql: string): void {
    for (const s of statements(sql)) this.applyOne(s.text);
  }

  private applyOne(text: string): void {
    let m: RegExpExecArray | null;
    if ((m = new RegExp(`^create (?:unlogged )?table (?:if not exists )?${QNAME} ?\\((.*)\\)`).exec(text))) {
      const columns = new Set<string>();
      for (const element of topLevel(m[2]!)) {
        const constraint = new RegExp(`^constraint ${NAME} (primary key|unique|foreign key|check|exclude)`).exec(element);
        if (constraint) {
          this.constraints.add(constraint[1]!);
          if (constraint[2] === 'primary key' || constraint[2] === 'unique') this.unique.add(constraint[1]!);
        } else if (!/^(primary key|unique|foreign key|check|exclude|like)\b/.test(element)) {
          const column = element.split(' ')[0]!;
          columns.add(column);
          if (/\b(big|small)?serial\b/.test(element)) this.others.add(`${m[1]}_${column}_seq`);
        }
      }
      this.tables.set(m[1]!, columns);
    } else if ((m = new RegExp(`^alter table (?:if exists )?(?:only )?${QNAME} (.*)$`).exec(text))) {
      const table = m[1]!;
      const columns = this.tables.get(table);
      for (const action of topLevel(m[2]!)) {
        let a: RegExpExecArray | null;
        if ((a = new RegExp(`^add (?:column )?(?:if not exists )?${NAME}`).exec(action)) && !/^add constraint /.test(action)) columns?.add(a[1]!);
        else if ((a = new RegExp(`^drop (?:column )?(?:if exists )?${NAME}`).exec(action)) && !/^drop constraint /.test(action)) columns?.delete(a[1]!);
        else if ((a = new RegExp(`^rename (?:column )?${NAME} to ${NAME}`).exec(action)) && a[1] !== 'to') {
          columns?.delete(a[1]!);
          columns?.add(a[2]!);
        } else if ((a = new RegExp(`^rename to ${NAME}`).exec(action)) && columns) {
          this.tables.delete(table);
          this.tables.set(a[1]!, columns);
        } else if ((a = new RegExp(`^add constraint ${NAME} (primary key|unique|foreign key|check|exclude)`).exec(action))) {
          this.constraints.add(a[1]!);
          if (a[2] === 'primary key' || a[2] === 'unique') this.unique.add(a[1]!);
        } else if ((a = new RegExp(`^drop constraint (?:if exists )?${NAME}`).exec(action))) {
          this.constraints.delete(a[1]!);
          this.unique.delete(a[1]!);
        }
      }
    } else if ((m = new RegExp(`^drop table (?:if exists )?(.*?)(?: cascade| restrict)?$`).exec(text))) {
      for (const name of m[1]!.split(',')) this.tables.delete(name.trim().replace(/^.*\./, ''));
    } else if ((m = new RegExp(`^create (unique )?index (?:concurrently )?(?:if not exists )?${NAME} on`).exec(text))) {
      this.indexes.add(m[2]!);
      if (m[1]) this.unique.add(m[2]!);
    } else if ((m = new RegExp(`^drop index (?:concurrently )?(?:if exists )?${QNAME}`).exec(text))) {
      this.indexes.delete(m[1]!);
      this.unique.delete(m[1]!);
    } else if ((m = new RegExp(`^create (?:or replace )?(?:type|sequence|function|view|materialized view|trigger|schema|extension|domain) (?:if not exists )?${QNAME}`).exec(text))) {
      this.others.add(m[1]!);
    }
  }
}

/** The version a `-- contract: ... since X.Y.Z` comment names, if any. */
const contractSince = (comments: string[]) => {
  for (const c of comments) {
    const m = /^contract:.*\bsince (\d+\.\d+\.\d+)\b/i.exec(c);
    if (m) return m[1];
  }
  return undefined;
};
const upgradeSafe = (comments: string[]) => comments.some((c) => /^upgrade-safe:\s*\S/i.test(c));

function olderOrSame(a: string, b: string): boolean {
  const [x, y] = [a, b].map((v) => v.split('.').map(Number));
  for (let i = 0; i < 3; i++) if (x![i] !== y![i]) return x![i]! < y![i]!;
  return true;
}

/**
 * Findings for the statements of `added` (the migrations since the release)
 * against the schema the release's own migrations (`released`) made.
 * `lastVersion` is the release's version, for `-- contract: ... since X.Y.Z`.
 */
export function lintMigrations(released: MigrationFile[], added: MigrationFile[], lastVersion: string): Finding[] {
  const model = new SchemaModel();
  for (const m of released) model.apply(m.sql);
  const created = new Set<string>();
  const findings: Finding[] = [];
  for (const migration of added) {
    for (const s of statements(migration.sql)) {
      for (const [kind, why] of judge(s.text, model, created)) {
        const since = contractSince(s.comments);
        if (since && olderOrSame(since, lastVersion)) continue;
        if (kind === 'compat' && upgradeSafe(s.comments)) continue;
        const wrongSince = since ? ` (its "-- contract: ... since ${since}" names a version after the last release, ${lastVersion}: the old instances still use it)` : '';
        findings.push({ migration: migration.name, statement: s.raw.slice(0, 120), kind, why: why + wrongSince });
      }
      noteCreated(s.text, created);
    }
  }
  return findings;
}

function noteCreated(text: string, created: Set<string>): void {
  const m = new RegExp(`^create (?:or replace )?(?:unique )?(?:unlogged )?(?:table|index|type|sequence|function|view|materialized view|trigger|schema|domain) (?:concurrently )?(?:if not exists )?${QNAME}`).exec(text);
  if (m) created.add(m[1]!);
  const constraint = new RegExp(`^alter table .* add constraint ${NAME}`).exec(text);
  if (constraint) created.add(constraint[1]!);
}

/** What is wrong with one statement for the release's instances; empty when nothing. */
function judge(text: string, model: SchemaModel, created: Set<string>): ['contract' | 'compat', string][] {
  const out: ['contract' | 'compat', string][] = [];
  let m: RegExpExecArray | null;
  const known = (table: string) => model.tables.has(table) && !created.has(table);
  if ((m = /^drop table (?:if exists )?(.*?)(?: cascade| restrict)?$/.exec(text))) {
    for (const name of m[1]!.split(',').map((n) => n.trim().replace(/^.*\./, ''))) {
      if (known(name)) out.push(['contract', `drops table ${name}, which the last release uses`]);
    }
    return out;
  }
  if ((m = new RegExp(`^truncate (?:table )?(?:only )?${QNAME}`).exec(text)) && known(m[1]!)) {
    return [['contract', `empties table ${m[1]}, which the last release uses`]];
  }
  if ((m = new RegExp(`^alter table (?:if exists )?(?:only )?${QNAME} (.*)$`).exec(text))) {
    const table = m[1]!;
    if (!known(table)) return out;
    const columns = model.tables.get(table)!;
    const releasedColumn = (c: string) => columns.has(c);
    for (const action of topLevel(m[2]!)) {
      let a: RegExpExecArray | null;
      if (/^rename /.test(action)) out.push(['contract', `renames ${/^rename to /.test(action) ? `table ${table}` : `a column of ${table}`}: the last release uses the old name`]);
      else if ((a = new RegExp(`^drop constraint (?:if exists )?${NAME}`).exec(action))) {
        if (!created.has(a[1]!)) out.push(['contract', `drops constraint ${a[1]} of ${table}, which the last release may rely on (a unique key its ON CONFLICT names, a cascade)`]);
      } else if ((a = new RegExp(`^drop (?:column )?(?:if exists )?${NAME}`).exec(action))) {
        if (releasedColumn(a[1]!)) out.push(['contract', `drops column ${table}.${a[1]}, which the last release reads or writes`]);
      } else if ((a = new RegExp(`^alter (?:column )?${NAME} (.*)$`).exec(action))) {
        const [column, change] = [a[1]!, a[2]!];
        if (!releasedColumn(column)) continue;
        if (/^(set data )?type\b/.test(change)) out.push(['contract', `changes the type of ${table}.${column}, which the last release reads and writes as the old type`]);
        else if (/^set not null\b/.test(change)) out.push(['compat', `makes ${table}.${column} NOT NULL: the last release may write NULL there or leave it out`]);
        else if (/^drop default\b/.test(change)) out.push(['compat', `drops the default of ${table}.${column}: the last release's inserts that leave it out fail`]);
      } else if ((a = new RegExp(`^add constraint ${NAME} (primary key|unique|foreign key|check|exclude)(.*)$`).exec(action))) {
        const over = a[2] === 'foreign key' ? columnsIn(/^\s*\(([^)]*)\)/.exec(a[3]!)?.[1] ?? '') : [];
        if (a[2] !== 'foreign key' || over.some(releasedColumn)) {
          out.push(['compat', `adds a ${a[2]} constraint to ${table}: rows the last release writes may violate it`]);
        }
      } else if ((a = new RegExp(`^add (?:column )?(?:if not exists )?${NAME} (.*)$`).exec(action))) {
        if (/\bnot null\b/.test(a[2]!) && !/\bdefault\b/.test(a[2]!) && !/\bgenerated\b/.test(a[2]!)) {
          out.push(['compat', `adds ${table}.${a[1]} NOT NULL without a DEFAULT: the last release's inserts leave it out and fail`]);
        }
      }
    }
    return out;
  }
  if ((m = new RegExp(`^create unique index (?:concurrently )?(?:if not exists )?${NAME} on (?:only )?${QNAME}(?: using [a-z]+)? ?\\((.*)\\)`).exec(text))) {
    const [table, list] = [m[2]!, m[3]!];
    if (known(table) && columnsIn(list).some((c) => model.tables.get(table)!.has(c))) {
      out.push(['compat', `adds unique index ${m[1]} on ${table}: rows the last release writes may violate it`]);
    }
    return out;
  }
  if ((m = new RegExp(`^drop index (?:concurrently )?(?:if exists )?${QNAME}`).exec(text))) {
    if (model.unique.has(m[1]!) && !created.has(m[1]!)) out.push(['contract', `drops unique index ${m[1]}, which the last release's ON CONFLICT or lookups may name`]);
    return out;
  }
  if ((m = new RegExp(`^alter type ${QNAME} (add value|rename)`).exec(text)) && !created.has(m[1]!)) {
    return [[m[2] === 'rename' ? 'contract' : 'compat', m[2] === 'rename' ? `renames in type ${m[1]}, which the last release uses` : `adds a value to type ${m[1]}: the last release fails on rows that hold it`]];
  }
  if ((m = new RegExp(`^drop (type|sequence|function|procedure|aggregate|view|materialized view|trigger|policy|rule|schema|extension|domain) (?:if exists )?${QNAME}`).exec(text)) && !created.has(m[2]!)) {
    return [['contract', `drops ${m[1]} ${m[2]}, which the new migrations did not create: the last release may use it`]];
  }
  return out;
}
