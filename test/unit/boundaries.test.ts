import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { cruise, type ICruiseResult, type IConfiguration } from 'dependency-cruiser';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain ES module script without type declarations
import { oversized } from '../../scripts/check-file-sizes.mjs';

const ROOT = resolve(import.meta.dirname, '../..');
const rules = createRequire(import.meta.url)(join(ROOT, '.dependency-cruiser.cjs')) as IConfiguration;

/** The rule violations dependency-cruiser finds in `folders` of `baseDir`, as `rule: from -> to`. */
async function violations(baseDir: string, folders: string[]): Promise<string[]> {
  const { output } = await cruise(folders, { ruleSet: rules, validate: true, baseDir, ...rules.options, tsConfig: undefined });
  return (output as ICruiseResult).summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`);
}

describe('import boundaries (dependency-cruiser, .dependency-cruiser.cjs)', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'sandboxd-boundaries-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  const write = (path: string, text: string) => {
    mkdirSync(dirname(join(scratch, path)), { recursive: true });
    writeFileSync(join(scratch, path), text);
  };

  it('finds none in src/ and bench/', async () => {
    expect(await violations(ROOT, ['src', 'bench'])).toEqual([]);
  });

  it('fails an API client that imports a service, and a service or an HTTP route that imports the API client', async () => {
    const tree = join(scratch, 'client-case');
    const put = (path: string, text: string) => {
      mkdirSync(dirname(join(tree, path)), { recursive: true });
      writeFileSync(join(tree, path), text);
    };
    put('src/services/sandbox-service.ts', "export const service = 1;\n");
    put('src/client/api-client.ts', "import { service } from '../services/sandbox-service.js';\nexport const client = service;\n");
    put('src/services/caller.ts', "import { client } from '../client/api-client.js';\nexport const caller = client;\n");
    put('src/http/routes.ts', "import { client } from '../client/api-client.js';\nexport const routes = client;\n");
    put('src/mcp/tool.ts', "import { client } from '../client/api-client.js';\nexport const tool = client;\n");
    put('src/cli/main.ts', "import { client } from '../client/api-client.js';\nexport const main = client;\n");
    const found = await violations(tree, ['src']);
    expect(found).toEqual(
      expect.arrayContaining([
        'client-imports-only-below: src/client/api-client.ts -> src/services/sandbox-service.ts',
        'client-only-for-faces: src/services/caller.ts -> src/client/api-client.ts',
        'client-only-for-faces: src/http/routes.ts -> src/client/api-client.ts',
      ]),
    );
    expect(found.filter((v) => v.includes('src/mcp/') || v.includes('src/cli/'))).toEqual([]);
  });

  it('fails a backend that imports a service, a face that imports a backend, and a cycle', async () => {
    write('src/services/services.ts', "export const services = 1;\n");
    write('src/backends/backend.ts', "export const backend = 1;\n");
    write('src/backends/docker/docker-backend.ts', "import { services } from '../../services/services.js';\nexport const docker = services;\n");
    write('src/backends/fake/fake-backend.ts', "import { docker } from '../docker/docker-backend.js';\nexport const fake = docker;\n");
    write('src/http/app.ts', "import { backend } from '../backends/backend.js';\nexport const app = backend;\n");
    write('src/services/support/a.ts', "import { b } from './b.js';\nexport const a = () => b;\n");
    write('src/services/support/b.ts', "import { a } from './a.js';\nexport const b = () => a;\n");
    write('src/services/support/clock.ts', "import { services } from '../services.js';\nexport const clock = services;\n");
    const found = await violations(scratch, ['src']);
    expect(found).toEqual(
      expect.arrayContaining([
        'backends-imports-only-below: src/backends/docker/docker-backend.ts -> src/services/services.ts',
        'backend-imports-no-other-backend: src/backends/fake/fake-backend.ts -> src/backends/docker/docker-backend.ts',
        'http-imports-only-below: src/http/app.ts -> src/backends/backend.ts',
        'service-support-knows-no-domain: src/services/support/clock.ts -> src/services/services.ts',
        'no-circular: src/services/support/a.ts -> src/services/support/b.ts',
      ]),
    );
  });

  it('fails a domain that imports one the domain graph does not give it, a type-only cycle, and a module read outside DOMAINS', async () => {
    const tree = join(scratch, 'domain-case');
    const put = (path: string, text: string) => {
      mkdirSync(dirname(join(tree, path)), { recursive: true });
      writeFileSync(join(tree, path), text);
    };
    // sandboxes may not use commands (commands uses sandboxes): a type-only import counts too.
    put('src/services/commands/exec-service.ts', "export class ExecService { run(): void {} }\n");
    put('src/services/sandboxes/sandbox-service.ts', "import type { ExecService } from '../commands/exec-service.js';\nexport type Uses = ExecService;\n");
    // commands may use sandboxes: allowed.
    put('src/services/commands/run-service.ts', "import type { Uses } from '../sandboxes/sandbox-service.js';\nexport type Runs = Uses;\n");
    put('src/services/events/a.ts', "import type { B } from './b.js';\nexport interface A { b: B }\n");
    put('src/services/events/b.ts', "import type { A } from './a.js';\nexport interface B { a: A }\n");
    put('src/services/events/module.ts', "export const eventsModule = { name: 'events' };\n");
    put('src/services/egress/egress-service.ts', "import { eventsModule } from '../events/module.js';\nexport const egress = eventsModule;\n");
    put('src/services/domains.ts', "import { eventsModule } from './events/module.js';\nexport const DOMAINS = [eventsModule];\n");
    const found = await violations(tree, ['src']);
    expect(found).toEqual(
      expect.arrayContaining([
        'domain-sandboxes-uses-only-its-graph: src/services/sandboxes/sandbox-service.ts -> src/services/commands/exec-service.ts',
        'no-circular: src/services/events/a.ts -> src/services/events/b.ts',
        'only-domains-imports-modules: src/services/egress/egress-service.ts -> src/services/events/module.ts',
      ]),
    );
    expect(found.filter((v) => v.startsWith('domain-commands-') || v.includes('src/services/domains.ts ->'))).toEqual([]);
  });

  it('fails an orchestration interpreter file that imports its service, a repository or a backend, types included', async () => {
    const interpreter = 'src/services/durable/orchestrations/interpreter';
    write('src/services/durable/orchestrations/orchestration-service.ts', "export class OrchestrationService {}\n");
    write('src/state/orchestration-repository.ts', "export interface OrchestrationRepository { id: string }\n");
    write('src/schemas/common.ts', "export const timestamp = 1;\n");
    write('src/backends/backend.ts', "export const backend = 1;\n");
    write(`${interpreter}/dsl.ts`, "export const LIMITS = 1;\n");
    write(
      `${interpreter}/decide.ts`,
      "import type { OrchestrationService } from '../orchestration-service.js';\n" +
        "import type { OrchestrationRepository } from '../../../../state/orchestration-repository.js';\n" +
        "import { backend } from '../../../../backends/backend.js';\n" +
        "import { timestamp } from '../../../../schemas/common.js';\n" +
        "import { LIMITS } from './dsl.js';\n" +
        'export type Uses = [OrchestrationService, OrchestrationRepository, typeof backend, typeof timestamp, typeof LIMITS];\n',
    );
    const found = (await violations(scratch, ['src'])).filter((line) => line.startsWith('orchestration-interpreter-is-pure'));
    expect(found.sort()).toEqual([
      `orchestration-interpreter-is-pure: ${interpreter}/decide.ts -> src/backends/backend.ts`,
      `orchestration-interpreter-is-pure: ${interpreter}/decide.ts -> src/services/durable/orchestrations/orchestration-service.ts`,
      `orchestration-interpreter-is-pure: ${interpreter}/decide.ts -> src/state/orchestration-repository.ts`,
    ]);
  });
});

describe('file sizes (scripts/check-file-sizes.mjs)', () => {
  it('finds no source file over 600 lines', () => {
    expect(oversized(ROOT, 600)).toEqual([]);
  });

  it('names a file that passes the limit', () => {
    const tree = mkdtempSync(join(tmpdir(), 'sandboxd-sizes-'));
    try {
      mkdirSync(join(tree, 'src/services'), { recursive: true });
      mkdirSync(join(tree, 'agent'));
      writeFileSync(join(tree, 'src/services/long.ts'), 'export const x = 1;\n'.repeat(601));
      writeFileSync(join(tree, 'src/services/short.ts'), 'export const x = 1;\n'.repeat(600));
      writeFileSync(join(tree, 'agent/main.go'), 'package main\n'.repeat(601));
      expect(oversized(tree, 600)).toEqual(['src/services/long.ts (601 lines)', 'agent/main.go (601 lines)']);
    } finally {
      rmSync(tree, { recursive: true, force: true });
    }
  });
});
