import type { Tool } from './tool.js';

/**
 * The `core` profile: an assistant's everyday loop in 15 tools (some clients cap the tools they
 * take at about 40, and every listed tool costs its definition in every turn): one-off runs,
 * a sandbox's life, commands, files, background commands and a preview URL.
 */
export const CORE_TOOLS = [
  'sandbox_create',
  'sandbox_list',
  'sandbox_start',
  'sandbox_remove',
  'sandbox_run',
  'sandbox_exec',
  'sandbox_file_read',
  'sandbox_file_write',
  'sandbox_write_files',
  'sandbox_file_list',
  'sandbox_exec_detach',
  'sandbox_exec_status',
  'sandbox_exec_logs',
  'sandbox_exec_kill',
  'sandbox_port_url',
] as const;

/** A `--tools` value that selects nothing, or names what is neither a tool nor a profile. */
export class ToolSetError extends Error {
  override readonly name = 'ToolSetError';
}

/**
 * The named profiles, each a list of tool names: `core`, `full` (every tool) and one per domain
 * under the domain's name (`sandboxes`, `stores`, `objects`, `orchestrations`, ...), so that a
 * new domain's tools join a profile of their own.
 */
export function toolProfiles(tools: readonly Tool[], byDomain: Readonly<Record<string, readonly Tool[]>>): Record<string, string[]> {
  const names = (list: readonly Tool[]) => list.map((tool) => tool.name);
  return { core: [...CORE_TOOLS], full: names(tools), ...Object.fromEntries(Object.entries(byDomain).map(([domain, list]) => [domain, names(list)])) };
}

const isGlob = (entry: string): boolean => /[*?]/.test(entry);

/** A glob over tool names: `*` any run of characters, `?` one character. */
const globPattern = (glob: string): RegExp =>
  new RegExp(`^${glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`);

/**
 * The tools a `--tools` value selects, in the order of `tools`: comma-separated entries, each a
 * profile's name, a tool's name or a glob (`sandbox_*`, `store_?uery`), their union. Throws
 * ToolSetError naming every entry that selects no tool, with the profiles there are; `source`
 * says where the value came from (the flag, or the environment variable).
 */
export function selectTools(value: string, tools: readonly Tool[], profiles: Readonly<Record<string, readonly string[]>>, source = '--tools'): Tool[] {
  const entries = value.split(',').map((entry) => entry.trim()).filter(Boolean);
  const profileList = Object.entries(profiles).map(([name, list], index) => `${name} (${list.length}${index === 0 ? ' tools' : ''})`).join(', ');
  if (entries.length === 0) throw new ToolSetError(`${source} names no tool: give tool names, globs such as sandbox_* or a profile: ${profileList}`);
  const chosen = new Set<string>();
  const unmatched: string[] = [];
  for (const entry of entries) {
    const profile = Object.hasOwn(profiles, entry) ? profiles[entry] : undefined;
    const pattern = globPattern(entry);
    const names = profile ?? tools.map((tool) => tool.name).filter((name) => pattern.test(name));
    if (names.length === 0) unmatched.push(entry);
    for (const name of names) chosen.add(name);
  }
  if (unmatched.length > 0) {
    const quote = (list: string[]) => list.map((entry) => `'${entry}'`).join(', ');
    const globs = unmatched.filter(isGlob);
    const plain = unmatched.filter((entry) => !isGlob(entry));
    const problems = [
      ...(plain.length > 0 ? [`${quote(plain)} ${plain.length === 1 ? 'is' : 'are'} neither a tool nor a profile`] : []),
      ...(globs.length > 0 ? [`${quote(globs)} ${globs.length === 1 ? 'matches' : 'match'} no tool`] : []),
    ];
    throw new ToolSetError(`${source}: ${problems.join('; ')}. Profiles: ${profileList}; the tools are listed in docs/mcp.md`);
  }
  return tools.filter((tool) => chosen.has(tool.name));
}
