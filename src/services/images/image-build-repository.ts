import type { Sql } from '../../state/sql.js';

/** Where a build is: `running` from before the engine starts it until it ends. */
export type ImageBuildStatus = 'running' | 'succeeded' | 'failed';

/** One row of `image_builds` (migration 0020_image_builds). */
export interface ImageBuildRow {
  id: string;
  name: string;
  status: ImageBuildStatus;
  error: string | null;
  image_id: string | null;
  started_at: string;
  finished_at: string | null;
}

/** Finished builds kept for GET /images/builds; older ones go as new ones start. */
export const KEPT_BUILDS = 200;

/** The images domain's table: a build is recorded before it starts and settled when it ends. */
export class ImageBuildRepository {
  constructor(private readonly sql: Sql) {}

  async start(row: Pick<ImageBuildRow, 'id' | 'name' | 'started_at'>): Promise<void> {
    await this.sql.transaction(async (tx) => {
      await tx.run('insert into "image_builds" ("id", "name", "status", "started_at") values (?, ?, \'running\', ?)', [row.id, row.name, row.started_at]);
      await tx.run(
        'delete from "image_builds" where "status" != \'running\' and "id" not in (select "id" from "image_builds" order by "started_at" desc, "id" desc limit ?)',
        [KEPT_BUILDS],
      );
    });
  }

  async finish(id: string, outcome: { status: Exclude<ImageBuildStatus, 'running'>; error?: string; imageId?: string; at: string }): Promise<void> {
    await this.sql.run('update "image_builds" set "status" = ?, "error" = ?, "image_id" = ?, "finished_at" = ? where "id" = ?', [
      outcome.status,
      outcome.error ?? null,
      outcome.imageId ?? null,
      outcome.at,
      id,
    ]);
  }

  /** Builds still `running` in the table. */
  running(): Promise<ImageBuildRow[]> {
    return this.sql.all('select * from "image_builds" where "status" = \'running\' order by "started_at"');
  }

  /** The newest builds first. */
  list(): Promise<ImageBuildRow[]> {
    return this.sql.all('select * from "image_builds" order by "started_at" desc, "id" desc');
  }
}
