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
 *   services/          the domain: backends, state, schemas, images, telemetry, domain, errors, paths
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
  services: ['http', 'mcp', 'cli', 'config', 'runtime'],
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

module.exports = {
  forbidden: [
    ...Object.entries(FORBIDDEN).map(([from, targets]) => ({
      name: `${from}-imports-only-below`,
      comment: `src/${from} may not import ${targets.join(', ')} (transport -> service -> backend, one way)`,
      severity: 'error',
      from: { path: layer(from) },
      to: { path: anyOf(...targets) },
    })),
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
      name: 'no-circular',
      comment: 'import cycles make start-up order and refactoring fragile',
      severity: 'error',
      from: {},
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
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
