import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
export const anchorOf = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');

/** The anchors of a Markdown document's headings (code blocks skipped). */
function anchors(text: string): Set<string> {
  const found = new Set<string>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const heading = !fenced && /^#{1,6} (.*)$/.exec(line);
    if (heading) found.add(anchorOf(heading[1]!));
  }
  return found;
}

/**
 * The relative links of the documents (paths from `root`) whose file or heading does not
 * exist, as `file: target`. Links to web addresses are not followed.
 */
export function brokenLinks(root: string, files: string[]): string[] {
  const broken: string[] = [];
  for (const file of files) {
    const text = readFileSync(join(root, file), 'utf8').replace(/```[\s\S]*?```/g, '');
    for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1]!;
      if (/^[a-z]+:/.test(target)) continue;
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const resolved = path === '' ? file : normalize(join(dirname(file), path));
      const absolute = join(root, resolved);
      if (!existsSync(absolute)) {
        broken.push(`${file}: ${target}`);
        continue;
      }
      if (anchor !== undefined && resolved.endsWith('.md') && !anchors(readFileSync(absolute, 'utf8')).has(anchor)) broken.push(`${file}: ${target}`);
    }
  }
  return broken;
}
