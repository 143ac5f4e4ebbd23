import { describe, expect, it } from 'vitest';
import { CORE_TOOLS, selectTools, toolProfiles, ToolSetError } from '../../../src/mcp/tool-sets.js';
import { domainTools, domainToolSets } from '../../../src/services/domains.js';

describe('MCP tool sets (sandboxd mcp --tools)', () => {
  const tools = domainTools();
  const profiles = toolProfiles(tools, domainToolSets());
  const select = (value: string) => selectTools(value, tools, profiles).map((tool) => tool.name);

  it('core is at most 15 tools, each one the server has; full is every tool; each domain with tools is a profile', () => {
    expect(CORE_TOOLS.length).toBeLessThanOrEqual(15);
    expect(select('core')).toEqual(expect.arrayContaining([...CORE_TOOLS]));
    expect(select('core')).toHaveLength(CORE_TOOLS.length);
    expect(select('full')).toEqual(tools.map((tool) => tool.name));
    expect(Object.keys(profiles)).toEqual(expect.arrayContaining(['core', 'full', 'sandboxes', 'commands', 'stores', 'objects', 'orchestrations', 'schedules', 'browser']));
    expect(select('stores')).toEqual(['store_create', 'store_list', 'store_query', 'store_execute', 'store_command', 'store_delete']);
  });

  it('takes names, globs and profiles, comma-separated, as their union in the server order', () => {
    expect(select('store_query, snapshot_*')).toEqual(['snapshot_take', 'snapshot_restore', 'snapshot_list', 'snapshot_get', 'snapshot_delete', 'store_query']);
    expect(select('snapshot_?et')).toEqual(['snapshot_get']);
    expect(select('sandbox_run*,sandbox_run')).toEqual(['sandbox_run', 'sandbox_run_batch']);
    // A dot in a glob is a dot, not any character.
    expect(() => select('sandbox.run')).toThrow(/'sandbox\.run' is neither a tool nor a profile/);
    const union = select('core,stores');
    expect(union).toHaveLength(CORE_TOOLS.length + 6);
  });

  it('refuses what selects nothing, naming each entry, the profiles and where the value came from', () => {
    const refusal = (value: string, source?: string) => {
      try {
        selectTools(value, tools, profiles, source);
      } catch (err) {
        expect(err).toBeInstanceOf(ToolSetError);
        return (err as Error).message;
      }
      throw new Error(`${value} was accepted`);
    };
    expect(refusal('core,sandbox_teleport,zzz_*,sandbox_exec')).toMatch(
      /^--tools: 'sandbox_teleport' is neither a tool nor a profile; 'zzz_\*' matches no tool\. Profiles: core \(15 tools\), full \(\d+\), .*stores \(6\)/,
    );
    expect(refusal(' , ', 'SANDBOXD_MCP_TOOLS')).toMatch(/^SANDBOXD_MCP_TOOLS names no tool: give tool names, globs such as sandbox_\* or a profile: core/);
  });
});
