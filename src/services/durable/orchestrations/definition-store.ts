/**
 * Orchestration definitions: the DSL validated at definition time and kept by name, versioned by
 * the hash of its content (a POST of the same content keeps the version). Instances keep a
 * snapshot of the version they started with, so updating or deleting a definition never
 * changes a running instance.
 */
import { notFound } from '../../../errors.js';
import type { OrchestrationDefinitionView } from '../../../schemas/orchestration-schemas.js';
import type { DefinitionRecord, OrchestrationRepository } from '../../../state/orchestration-repository.js';
import type { Clock } from '../../support/clock.js';
import { definitionHash, validateDefinition, type Definition } from './interpreter/index.js';

/** A definition as the API shows it. */
export type DefinitionView = OrchestrationDefinitionView;

export class DefinitionStore {
  constructor(
    private readonly repo: OrchestrationRepository,
    private readonly clock: Clock,
  ) {}

  /** The DSL checked: BAD_REQUEST naming each problem's path. */
  check(raw: unknown): Definition {
    return validateDefinition(raw);
  }

  /** NOT_FOUND unless definition `name` exists. */
  async require(name: string): Promise<DefinitionRecord<Definition>> {
    const record = (await this.repo.definition(name)) as DefinitionRecord<Definition> | undefined;
    if (!record) throw notFound(`orchestration definition '${name}' not found`);
    return record;
  }

  async list(): Promise<DefinitionView[]> {
    return ((await this.repo.definitions()) as DefinitionRecord<Definition>[]).map(viewOf);
  }

  async get(name: string): Promise<DefinitionView> {
    return viewOf(await this.require(name));
  }

  /** Creates or updates; `created` says which (201 or 200). The version moves only when the content does. */
  async save(raw: unknown): Promise<{ definition: DefinitionView; created: boolean }> {
    const content = this.check(raw);
    const hash = definitionHash(content);
    const existing = (await this.repo.definition(content.name)) as DefinitionRecord<Definition> | undefined;
    if (existing?.hash === hash) return { definition: viewOf(existing), created: false };
    const now = this.clock().toISOString();
    const record: DefinitionRecord<Definition> = {
      name: content.name,
      version: (existing?.version ?? 0) + 1,
      content,
      hash,
      created_at: existing?.created_at ?? now,
      updated_at: now,
    };
    await this.repo.saveDefinition(record);
    return { definition: viewOf(record), created: !existing };
  }

  /** Deletes a definition; instances keep their snapshots. */
  async remove(name: string): Promise<string> {
    if (!(await this.repo.deleteDefinition(name))) throw notFound(`orchestration definition '${name}' not found`);
    return `orchestration definition '${name}' deleted`;
  }
}

function viewOf(record: DefinitionRecord<Definition>): DefinitionView {
  const { content } = record;
  return {
    name: record.name,
    version: record.version,
    description: content.description ?? null,
    defaults: content.defaults ?? null,
    steps: content.steps,
    output: content.output ?? null,
    created_at: record.created_at,
    updated_at: record.updated_at,
  };
}
