/**
 * Generated blocks in Markdown: the text between `<!-- generated:NAME -->` and
 * `<!-- /generated:NAME -->` belongs to `npm run docs`; everything else is written by hand.
 */

/** One generated block found in a document. */
export interface GeneratedBlock {
  name: string;
  /** The text between the markers, without the newlines that follow the opening and precede the closing marker. */
  body: string;
}

const BLOCK = /<!-- generated:([a-z0-9-]+) -->\n([\s\S]*?)\n?<!-- \/generated:\1 -->/g;
const OPENING = /<!-- generated:([a-z0-9-]+) -->/g;

/** Every generated block of a document, in order; throws when an opening marker has no closing one. */
export function generatedBlocks(text: string): GeneratedBlock[] {
  const blocks = [...text.matchAll(BLOCK)].map((match) => ({ name: match[1]!, body: match[2]! }));
  const opened = [...text.matchAll(OPENING)].map((match) => match[1]!);
  const unclosed = opened.filter((name) => !blocks.some((block) => block.name === name));
  if (unclosed.length > 0) throw new Error(`generated block '${unclosed[0]}' has no closing <!-- /generated:${unclosed[0]} --> marker`);
  return blocks;
}

/** The document with each block's body replaced by `render(name)`; unknown names throw. */
export function fillGenerated(text: string, render: (name: string) => string): string {
  generatedBlocks(text);
  return text.replace(BLOCK, (_all, name: string) => `<!-- generated:${name} -->\n${render(name).trimEnd()}\n<!-- /generated:${name} -->`);
}

/**
 * A Markdown table cell: line breaks folded, pipes escaped, and outside code spans `<` written
 * as `&lt;` so that `<name>` is not taken for an HTML tag.
 */
export const cell = (value: string): string =>
  value
    .replace(/\s*\n\s*/g, ' ')
    .replace(/\|/g, '\\|')
    .split('`')
    .map((part, index) => (index % 2 === 0 ? part.replace(/</g, '&lt;') : part))
    .join('`')
    .trim();

/** A Markdown table of a header and rows. */
export function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}
