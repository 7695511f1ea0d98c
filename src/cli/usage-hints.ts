// What the parser's usage errors say, made precise: yargs names an unknown flag both as typed and camel-cased
// (`finality-dept, finalityDept`) and suggests nothing for a flag or a choice; a user who mistyped one gets the
// nearest known name.
import { nearestName } from '../errors.js';

const UNKNOWN = /^Unknown arguments?: (.+)$/;
const INVALID_CHOICE = /^(\s*Argument: \S+, Given: (.+?)), (Choices: .+)$/;

const kebab = (name: string): string => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/** How `name` was typed as a flag (`--name`, `--name=…`, `--no-name`, `-n`), or undefined for a positional. */
function typedAsFlag(name: string, argv: readonly string[]): string | undefined {
  const forms = name.length === 1 ? [`-${name}`] : [`--${name}`, `--no-${name}`];
  return forms.find((f) => argv.some((a) => a === f || a.startsWith(`${f}=`)));
}

/** The unknown names yargs listed, each once as typed (its camel-cased twin dropped), a flag or a positional. */
function unknownLine(list: string, flags: readonly string[], argv: readonly string[]): string {
  const names = list.split(', ');
  const typed = names.filter((n) => !(n !== kebab(n) && names.includes(kebab(n))));
  const command = argv.find((a) => !a.startsWith('-'));
  const described = typed.map((n) => {
    const flag = typedAsFlag(n, argv);
    if (flag === undefined) return n === command ? `unknown command "${n}" (chainlake --help lists them)` : `unexpected argument "${n}"`;
    const near = nearestName(n, flags);
    return `unknown flag ${flag}${near ? ` (did you mean --${near}?)` : ''}`;
  });
  return described.join('; ');
}

/** `line` of an "Invalid values:" message with the nearest choice to what was given, when one is near. */
function choiceLine(line: string): string {
  const m = INVALID_CHOICE.exec(line);
  if (!m) return line;
  const given = m[2]!.replace(/^"|"$/g, '');
  const choices = m[3]!
    .slice('Choices: '.length)
    .split(', ')
    .map((c) => c.replace(/^"|"$/g, ''));
  const near = nearestName(given, choices);
  return near ? `${m[1]} (did you mean "${near}"?), ${m[3]}` : line;
}

/**
 * `msg`, a usage error of the parser, with the nearest known flag or choice for a mistyped one. `flags` are the
 * command's options as declared (kebab-case), `argv` the line as typed.
 */
export function withSuggestions(msg: string, flags: readonly string[], argv: readonly string[]): string {
  const known = flags.filter((f) => f === kebab(f));
  return msg
    .split('\n')
    .map((line) => {
      const unknown = UNKNOWN.exec(line);
      return unknown ? unknownLine(unknown[1]!, known, argv) : choiceLine(line);
    })
    .join('\n');
}
