import { describe, expect, it } from 'vitest';
import { suggestionFor } from '../../../src/cli/suggestions.js';

describe('usage error suggestions', () => {
  const commands = ['serve', 'mcp', 'images', 'sandbox', 'exec', 'run', 'cp', 'shell', 'logs', 'events', 'snapshot', 'completion'];

  it('names the closest command to an unknown one', () => {
    expect(suggestionFor("error: unknown command 'frob'", commands)).toBe("(the closest command is 'run'; see --help for all of them)");
    expect(suggestionFor("error: unknown command 'snapshots'", commands)).toBe("(the closest command is 'snapshot'; see --help for all of them)");
  });

  it("names sandboxd's flag for one another tool spells differently", () => {
    expect(suggestionFor("error: unknown option '--url'", commands)).toBe('(did you mean --server?)');
    expect(suggestionFor("error: unknown option '--token'", commands)).toBe('(did you mean --api-key?)');
  });

  it('adds nothing where commander suggested already or there is nothing to say', () => {
    expect(suggestionFor("error: unknown command 'snapshto'\n(Did you mean snapshot?)", commands)).toBe('');
    expect(suggestionFor("error: unknown option '--bogus'", commands)).toBe('');
    expect(suggestionFor("error: missing required argument 'name'", commands)).toBe('');
  });
});
