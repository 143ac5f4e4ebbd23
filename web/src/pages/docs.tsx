import { authorizedFetch } from '../api';
import { Alert, Page, useLoad } from '../ui';

/** The parts of an OpenAPI 3.1 document this page renders. */
interface Schema {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  description?: string;
  default?: unknown;
  additionalProperties?: boolean | Schema;
}
interface Operation {
  operationId: string;
  summary?: string;
  description?: string;
  tags?: string[];
  parameters?: { name: string; in: string; required?: boolean; schema?: Schema; description?: string }[];
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, { description?: string; content?: Record<string, { schema: Schema }> }>;
}
interface OpenApi {
  info: { title: string; version: string; description?: string };
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema> };
}

const refName = (ref: string) => ref.split('/').pop() ?? ref;

/** A schema as a short type: `Sandbox`, `string[]`, `'a' | 'b'`, `{ ... }`. */
function typeText(schema: Schema | undefined): string {
  if (!schema) return 'any';
  if (schema.$ref) return refName(schema.$ref);
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  const union = schema.anyOf ?? schema.oneOf;
  if (union) return union.map(typeText).join(' | ');
  if (schema.type === 'array') return `${typeText(schema.items)}[]`;
  if (Array.isArray(schema.type)) return schema.type.join(' | ');
  if (schema.type === 'object' && !schema.properties) return 'object';
  return schema.type ?? 'object';
}

/** An object schema's fields as a table; a $ref links to its component below. */
function SchemaFields({ schema }: { schema: Schema }) {
  if (!schema.properties) return <code class="type">{typeText(schema)}</code>;
  return (
    <table class="schema">
      <tbody>
        {Object.entries(schema.properties).map(([name, field]) => {
          const ref = field.$ref ?? field.items?.$ref;
          return (
            <tr>
              <td>
                <code>{name}</code>
                {schema.required?.includes(name) ? <span class="req" title="required">*</span> : null}
              </td>
              <td>{ref ? <a href={`#schema-${refName(ref)}`}>{typeText(field)}</a> : <code class="type">{typeText(field)}</code>}</td>
              <td>{field.description ?? ''}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

function Body({ content }: { content: Record<string, { schema: Schema }> }) {
  return (
    <>
      {Object.entries(content).map(([type, { schema }]) => (
        <div>
          <span class="muted">{type}</span>{' '}
          {schema.$ref ? <a href={`#schema-${refName(schema.$ref)}`}>{refName(schema.$ref)}</a> : <SchemaFields schema={schema} />}
        </div>
      ))}
    </>
  );
}

function OperationView({ method, path, op }: { method: string; path: string; op: Operation }) {
  return (
    <article class="card operation" id={`op-${op.operationId}`}>
      <h3>
        <span class={`method method-${method}`}>{method.toUpperCase()}</span> <code>{path}</code>
      </h3>
      <p>
        <code class="opid">{op.operationId}</code> {op.summary}
      </p>
      {op.description && <p class="muted">{op.description}</p>}
      {op.parameters?.length ? (
        <table class="schema">
          <tbody>
            {op.parameters.map((p) => (
              <tr>
                <td>
                  <code>{p.name}</code>
                  {p.required ? <span class="req">*</span> : null}
                </td>
                <td class="muted">{p.in}</td>
                <td>
                  <code class="type">{typeText(p.schema)}</code> {p.description ?? p.schema?.description ?? ''}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {op.requestBody && (
        <>
          <h4>Request body</h4>
          <Body content={op.requestBody.content} />
        </>
      )}
      <h4>Responses</h4>
      <ul class="responses">
        {Object.entries(op.responses).map(([status, r]) => (
          <li>
            <strong>{status}</strong> {r.description ?? ''} {r.content && <Body content={r.content} />}
          </li>
        ))}
      </ul>
    </article>
  );
}

/** The API reference, rendered from the server's own /openapi.json (works offline). */
export function DocsPage() {
  const doc = useLoad(async () => {
    const response = await authorizedFetch('/openapi.json');
    if (!response.ok) throw new Error(`GET /openapi.json answered ${response.status}`);
    return (await response.json()) as OpenApi;
  }, []);
  const byTag = new Map<string, { method: string; path: string; op: Operation }[]>();
  for (const [path, methods] of Object.entries(doc.data?.paths ?? {})) {
    for (const [method, op] of Object.entries(methods)) {
      const tag = op.tags?.[0] ?? 'other';
      byTag.set(tag, [...(byTag.get(tag) ?? []), { method, path, op }]);
    }
  }
  return (
    <Page title="API reference" actions={<a href="/openapi.json">openapi.json</a>}>
      <Alert error={doc.error} />
      {doc.data && (
        <p>
          {doc.data.info.title} {doc.data.info.version}: {doc.data.info.description}
        </p>
      )}
      <nav class="card toc" aria-label="Operations">
        {[...byTag].map(([tag, ops]) => (
          <details>
            <summary>
              {tag} ({ops.length})
            </summary>
            <ul>
              {ops.map(({ method, path, op }) => (
                <li>
                  <a href={`#op-${op.operationId}`}>
                    {method.toUpperCase()} {path}
                  </a>
                </li>
              ))}
            </ul>
          </details>
        ))}
      </nav>
      {[...byTag].map(([tag, ops]) => (
        <section>
          <h2>{tag}</h2>
          {ops.map((o) => (
            <OperationView {...o} />
          ))}
        </section>
      ))}
      {doc.data?.components?.schemas && (
        <section>
          <h2>Schemas</h2>
          {Object.entries(doc.data.components.schemas).map(([name, schema]) => (
            <article class="card" id={`schema-${name}`}>
              <h3>{name}</h3>
              {schema.description && <p class="muted">{schema.description}</p>}
              <SchemaFields schema={schema} />
            </article>
          ))}
        </section>
      )}
    </Page>
  );
}
