/**
 * Import boundaries of src/ (docs/decisions.md, "Code rules"): data flows one way, transport -> service ->
 * backend, and nothing below imports from above. `npm run lint` and `npm test`
 * (test/unit/boundaries.test.ts) run these rules; every rule names the layer it protects.
 *
 *   cli/, runtime.ts   composition roots: may import anything
 *   http/, mcp/        faces: services, schemas, telemetry, domain, errors, paths (mcp: the HTTP API only,
 *                      through client/)
 *   client/            the API client of the CLI and MCP: schemas, domain, errors, paths; imported
 *                      only by cli/ and mcp/
 *   services/          the domain: backends, state, schemas, images, config, telemetry, domain, errors, paths;
 *                      one folder per domain, each using only the domains DOMAIN_GRAPH names;
 *                      its module.ts (and domains.ts, domain-module.ts) also names its routes and tools
 *   backends/          engines: images, telemetry, domain, errors, paths
 *   state/             persistence: domain, errors, paths
 *   schemas/           wire shapes: domain, errors
 *   config/            settings: domain, images, errors, paths
 *   images/            image catalog and builder: telemetry, errors, paths
 *   telemetry/, domain/, errors.ts, paths.ts   leaves
 */
const layer = (name) => `^src/${name}(/|\\.ts$)`;
const anyOf = (...names) => `^src/(${names.join('|')})(/|\\.ts$)`;

/** Each layer and the top-level parts of src/ it may not import. */
const FORBIDDEN = {
  http: ['backends', 'state', 'mcp', 'cli', 'config', 'runtime'],
  mcp: ['backends', 'state', 'services', 'http', 'cli', 'config', 'runtime'],
  client: ['backends', 'state', 'services', 'http', 'mcp', 'cli', 'config', 'images', 'telemetry', 'runtime'],
  services: ['http', 'mcp', 'cli', 'runtime'],
  backends: ['services', 'state', 'http', 'mcp', 'cli', 'config', 'schemas', 'runtime'],
  state: ['backends', 'services', 'http', 'mcp', 'cli', 'config', 'schemas', 'images', 'telemetry', 'runtime'],
  schemas: ['backends', 'services', 'state', 'http', 'mcp', 'cli', 'config', 'images', 'telemetry', 'runtime'],
  config: ['backends', 'services', 'state', 'http', 'mcp', 'cli', 'schemas', 'telemetry', 'runtime'],
  images: ['backends', 'services', 'state', 'http', 'mcp', 'cli', 'config', 'schemas', 'domain', 'runtime'],
  telemetry: ['backends', 'services', 'state', 'http', 'mcp', 'cli', 'config', 'schemas', 'images', 'domain', 'errors', 'runtime'],
  domain: ['backends', 'services', 'state', 'http', 'mcp', 'cli', 'config', 'schemas', 'images', 'telemetry', 'errors', 'paths', 'runtime'],
  errors: ['backends', 'services', 'state', 'http', 'mcp', 'cli', 'config', 'schemas', 'images', 'telemetry', 'domain', 'paths', 'runtime'],
  paths: ['backends', 'services', 'state', 'http', 'mcp', 'cli', 'config', 'schemas', 'images', 'telemetry', 'domain', 'errors', 'runtime'],
};

/**
 * The domain graph: each domain folder of src/services/ and the domains it may import (types
 * included). It must stay acyclic (checked below, at load). A domain reaches one it may not
 * import through the interfaces of services/context.ts, which the wiring fills.
 */
const DOMAIN_GRAPH = {
  support: [],
  events: ['support'],
  pools: ['support'],
  volumes: ['support'],
  sandboxes: ['events', 'pools', 'volumes', 'support'],
  images: ['pools', 'support'],
  egress: ['events', 'sandboxes', 'support'],
  commands: ['events', 'pools', 'sandboxes', 'support'],
  terminals: ['commands', 'events', 'sandboxes', 'support'],
  browser: ['sandboxes', 'support'],
  preview: ['sandboxes', 'support'],
  governance: ['events', 'support'],
  durable: ['support'],
  'durable/objects': ['commands', 'durable', 'events', 'sandboxes', 'support'],
  'durable/orchestrations': ['commands', 'durable', 'durable/objects', 'support'],
  'durable/schedules': ['commands', 'durable', 'events', 'sandboxes', 'support'],
  'durable/stores': ['commands', 'durable', 'egress', 'events', 'sandboxes', 'support'],
};

/** Throws when DOMAIN_GRAPH has a cycle (a domain that may reach itself). */
function assertAcyclic(graph) {
  const state = {};
  const visit = (name, path) => {
    if (state[name] === 'done') return;
    if (state[name] === 'visiting') throw new Error(`DOMAIN_GRAPH has a cycle: ${[...path, name].join(' -> ')}`);
    state[name] = 'visiting';
    for (const next of graph[name] ?? []) visit(next, [...path, name]);
    state[name] = 'done';
  };
  for (const name of Object.keys(graph)) visit(name, []);
}
assertAcyclic(DOMAIN_GRAPH);

/** A domain folder's files, not those of a nested domain (durable/ root files are the `durable` domain). */
const domainFiles = (name) => {
  const nested = Object.keys(DOMAIN_GRAPH).filter((other) => other.startsWith(`${name}/`));
  const folder = `^src/services/${name}/`;
  return nested.length ? { path: folder, pathNot: nested.map((other) => `^src/services/${other}/`) } : { path: folder };
};
/** The files of every domain but `name` and those it may import. */
const forbiddenDomains = (name) => {
  const allowed = new Set([name, ...DOMAIN_GRAPH[name]]);
  const others = Object.keys(DOMAIN_GRAPH).filter((other) => !allowed.has(other));
  return others.map((other) => domainFiles(other));
};
/** The composition files of services/: they name each domain's routes and tools. */
const COMPOSITION = ['^src/services/[a-z/-]+/module\\.ts$', '^src/services/domains\\.ts$', '^src/services/domain-module\\.ts$'];

module.exports = {
  forbidden: [
    ...Object.entries(FORBIDDEN).map(([from, targets]) => ({
      name: `${from}-imports-only-below`,
      comment: `src/${from} may not import ${targets.join(', ')} (transport -> service -> backend, one way)`,
      severity: 'error',
      from: from === 'services' ? { path: layer(from), pathNot: COMPOSITION } : { path: layer(from) },
      to: { path: anyOf(...targets) },
    })),
    {
      name: 'domain-modules-name-only-routes-and-tools',
      comment: 'a domain module (and the DOMAINS list) may name the faces\' route plugins and tool families, nothing else above services/',
      severity: 'error',
      from: { path: COMPOSITION },
      to: { path: anyOf('cli', 'runtime', 'mcp/server', 'http/app') },
    },
    {
      name: 'only-domains-imports-modules',
      comment: 'a domain\'s module.ts is read by the DOMAINS list (services/domains.ts) alone: domains meet through services/context.ts',
      severity: 'error',
      from: { pathNot: '^src/services/domains\\.ts$' },
      to: { path: '^src/services/[a-z/-]+/module\\.ts$' },
    },
    ...Object.keys(DOMAIN_GRAPH).flatMap((name) =>
      forbiddenDomains(name).map((target) => ({
        name: `domain-${name.replace('/', '-')}-uses-only-its-graph`,
        comment: `services/${name} may import only ${DOMAIN_GRAPH[name].join(', ') || 'no other domain'} (DOMAIN_GRAPH; type-only imports too)`,
        severity: 'error',
        from: { ...domainFiles(name), pathNot: [...(domainFiles(name).pathNot ?? []), ...COMPOSITION] },
        to: target,
      })),
    ),
    {
      name: 'client-only-for-faces',
      comment: 'src/client/ speaks to the HTTP API from outside: only the faces that are its clients (cli/, mcp/) import it',
      severity: 'error',
      from: { path: '^src/', pathNot: anyOf('cli', 'mcp', 'client') },
      to: { path: layer('client') },
    },
    {
      name: 'backend-imports-no-other-backend',
      comment: 'a backend (backends/<id>/) is self-contained: it shares only the top-level backend files and backends/agent/',
      severity: 'error',
      from: { path: '^src/backends/([^/]+)/' },
      to: { path: '^src/backends/([^/]+)/', pathNot: ['^src/backends/$1/', '^src/backends/agent/'] },
    },
    {
      name: 'service-support-knows-no-domain',
      comment: 'services/support/ is infrastructure (clock, durations, mutex, loops): it imports no domain folder of services/',
      severity: 'error',
      from: { path: '^src/services/support/' },
      to: { path: '^src/services/', pathNot: '^src/services/support/' },
    },
    {
      name: 'orchestration-interpreter-is-pure',
      comment:
        'the orchestration interpreter (services/durable/orchestrations/interpreter/) is pure: decide() replays a history and ' +
        'returns events and commands, so it is tested and fuzzed without I/O; it may import only itself, schemas/, errors.ts ' +
        'and the pure JSON depth bound (domain/json-depth.ts), ' +
        'never the service around it, a repository, a backend or another domain (type-only imports included)',
      severity: 'error',
      from: { path: '^src/services/durable/orchestrations/interpreter/' },
      to: { path: '^src/', pathNot: ['^src/services/durable/orchestrations/interpreter/', '^src/schemas/', '^src/errors\\.ts$', '^src/domain/json-depth\\.ts$'] },
    },
    {
      name: 'no-circular',
      comment: 'import cycles, of types too, make start-up order and refactoring fragile',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-unresolvable',
      comment: 'an import that resolves to nothing is a typo or a deleted file',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(node_modules|dist)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'], exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
  },
};
