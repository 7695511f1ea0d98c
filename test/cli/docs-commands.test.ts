// Every chainlake command the README and docs/*.md show, in a code block or inline, names a command that exists,
// flags that command has, and job files that exist (DEVELOPERS.md: "every command it shows runs as written").
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../../src/cli/command-registry.js';
import { runCliInProcess } from '../helpers/cli.js';

const DOCS = [
  'README.md',
  ...readdirSync('docs')
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The chainlake invocations of a Markdown file's code blocks: one per line, with its continuation lines joined. */
function commandLines(file: string): { file: string; line: string }[] {
  const found: { file: string; line: string }[] = [];
  let inBlock = false;
  let pending = '';
  for (const raw of readFileSync(file, 'utf8').split('\n')) {
    if (/^\s*```/.test(raw)) {
      inBlock = !inBlock;
      continue;
    }
    if (!inBlock) continue;
    const text = pending + raw.trim();
    if (text.endsWith('\\')) {
      pending = `${text.slice(0, -1)} `;
      continue;
    }
    pending = '';
    // A line that starts the CLI (after a prompt or environment settings), up to a pipe, `&&`, `;`, `>` or a comment.
    const m = /^(?:\$\s+)?(?:[A-Z_]+=\S*\s+)*(?:chainlake|npx chainlake|node dist\/cli\/main\.js)\s+([^|;&#>]*)/.exec(text);
    if (m) found.push({ file, line: m[1]!.trim() });
  }
  return found;
}

/** The chainlake commands the prose shows in inline code (`chainlake status --catalog URL`), the README's command table's included. */
function inlineCommands(file: string): { file: string; line: string }[] {
  const prose = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  return [...prose.matchAll(/`(?:chainlake|node dist\/cli\/main\.js) ([^`]+)`/g)].map((m) => ({ file, line: m[1]!.replace(/\\\|/g, '|') }));
}

/** A shell line's words, with quoted strings kept whole. */
const words = (line: string): string[] => (line.match(/"[^"]*"|'[^']*'|\S+/g) ?? []).map((w) => w.replace(/^["']|["']$/g, ''));

const helpFlags = new Map<string, Set<string>>();
async function flagsOf(command: string): Promise<Set<string>> {
  if (!helpFlags.has(command)) {
    const help = await runCliInProcess([...command.split(' '), '--help']);
    helpFlags.set(command, new Set([...help.stdout.matchAll(/(?:^|[\s,[])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b/g)].map((x) => x[1]!)));
  }
  return helpFlags.get(command)!;
}

describe('the commands the README and docs show', () => {
  const lines = DOCS.flatMap(commandLines);

  it('finds the command lines (README and docs)', () => {
    expect(lines.filter((l) => l.file === 'README.md').length).toBeGreaterThan(15);
    expect(new Set(lines.map((l) => l.file)).size).toBeGreaterThan(4);
  });

  it('in the prose, name commands that exist, flags those commands have, and job files that exist', async () => {
    const problems: string[] = [];
    for (const { file, line } of DOCS.flatMap(inlineCommands)) {
      const w = words(line);
      const name = w[0];
      if (name === undefined || !/^[a-z-]+$/.test(name) || name === 'completion') continue;
      // The top-level flags alone (`chainlake --version`) are whole command lines.
      if ((name === '--version' || name === '--help') && w.length === 1) continue;
      if (!(name in COMMANDS)) {
        problems.push(`${file}: \`${line}\`: no command ${name}`);
        continue;
      }
      const sub = name === 'catalog' && w[1] && /^[a-z]+$/.test(w[1]) ? `${name} ${w[1]}` : name;
      const flags = await flagsOf(sub);
      // Flags inside a synopsis's brackets too (`[--format text|json]`).
      for (const [flag] of line.matchAll(/(?<![\w-])--[a-z][a-z0-9-]*/g))
        if (!flags.has(flag) && !flags.has(flag.replace(/^--no-/, '--'))) problems.push(`${file}: \`${line}\`: ${sub} has no ${flag}`);
      for (const word of w) if (/^jobs\/[^<>{}*]+\.json$/.test(word) && !existsSync(word)) problems.push(`${file}: \`${line}\`: ${word} does not exist`);
    }
    expect(problems).toEqual([]);
  });

  it('name commands that exist, flags those commands have, and job files that exist', async () => {
    const problems: string[] = [];
    for (const { file, line } of lines) {
      const w = words(line);
      const name = w[0];
      if (name === undefined || name.startsWith('-') || name.includes('<')) continue;
      if (!(name in COMMANDS)) {
        problems.push(`${file}: \`${line}\`: no command ${name}`);
        continue;
      }
      // `catalog rebuild`: a command with subcommands is asked for the subcommand's help.
      const sub = name === 'catalog' && w[1] && !w[1].startsWith('-') ? `${name} ${w[1]}` : name;
      const flags = await flagsOf(sub);
      for (const word of w.slice(1)) {
        const flag = /^(--?[a-zA-Z][a-zA-Z0-9-]*)(=.*)?$/.exec(word)?.[1];
        if (flag && !flags.has(flag) && !flags.has(flag.replace(/^--no-/, '--'))) problems.push(`${file}: \`${line}\`: ${sub} has no ${flag}`);
        if (/^jobs\/[^<>{}*]+\.json$/.test(word) && !existsSync(word)) problems.push(`${file}: \`${line}\`: ${word} does not exist`);
      }
    }
    expect(problems).toEqual([]);
  });
});
