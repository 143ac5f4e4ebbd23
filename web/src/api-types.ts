import type { components, operations, paths } from './generated/api';

/**
 * The API's types as the dashboard uses them, all taken from `generated/api.ts`, which
 * openapi-typescript writes from the server's OpenAPI document (`npm run gen:types` at the
 * repository's root; a test fails when it is stale). Nothing here restates a field.
 */

/** A schema of the document by its name: `Schema<'Sandbox'>`. */
export type Schema<N extends keyof components['schemas']> = components['schemas'][N];

/** An operation of the API by its operationId: `'listSandboxes'`, `'createSnapshot'`, ... */
export type Operation = keyof operations;

type Responses<O extends Operation> = operations[O]['responses'];
type Json<R> = R extends { content: { 'application/json': infer B } } ? B : never;
type SuccessStatus = 200 | 201 | 202;

/** The JSON body of an operation's success reply. */
type SuccessBody<O extends Operation> = { [S in keyof Responses<O>]: S extends SuccessStatus ? Json<Responses<O>[S]> : never }[keyof Responses<O>];

/** What an operation answers with: the envelope's `data`, or the body itself where the route sends no envelope (the browser routes). */
export type Reply<O extends Operation> = SuccessBody<O> extends { success: true; data: infer D } ? D : SuccessBody<O>;

/** The JSON body an operation takes: never where it takes none. */
export type RequestBody<O extends Operation> = Json<NonNullable<operations[O]['requestBody']>>;

/** The body argument of a call: none, optional or required, as the operation says. */
export type BodyArgument<O extends Operation> = [RequestBody<O>] extends [never]
  ? []
  : undefined extends operations[O]['requestBody']
    ? [body?: RequestBody<O>]
    : [body: RequestBody<O>];

type HttpMethod = 'get' | 'put' | 'post' | 'delete' | 'patch';

/** The HTTP method an operation is served on, upper-case: `Method<'createSandbox'>` is `'POST'`. */
export type Method<O extends Operation> = {
  [P in keyof paths]: { [M in HttpMethod & keyof paths[P]]: paths[P][M] extends operations[O] ? Uppercase<M> : never }[HttpMethod & keyof paths[P]];
}[keyof paths];
