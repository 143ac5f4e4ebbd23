import type { Statements } from '../../state/store.js';

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
  constructor(private readonly statements: Statements) {}

  start(row: Pick<ImageBuildRow, 'id' | 'name' | 'started_at'>): void {
    this.statements.transaction(() => {
      this.statements.get('insert into "image_builds" ("id", "name", "status", "started_at") values (?, ?, \'running\', ?)').run(row.id, row.name, row.started_at);
      this.statements
        .get('delete from "image_builds" where "status" != \'running\' and "id" not in (select "id" from "image_builds" order by "started_at" desc, rowid desc limit ?)')
        .run(KEPT_BUILDS);
    });
  }

  finish(id: string, outcome: { status: Exclude<ImageBuildStatus, 'running'>; error?: string; imageId?: string; at: string }): void {
    this.statements
      .get('update "image_builds" set "status" = ?, "error" = ?, "image_id" = ?, "finished_at" = ? where "id" = ?')
      .run(outcome.status, outcome.error ?? null, outcome.imageId ?? null, outcome.at, id);
  }

  /** Builds still `running` in the table. */
  running(): ImageBuildRow[] {
    return this.statements.get('select * from "image_builds" where "status" = \'running\' order by "started_at"').all() as ImageBuildRow[];
  }

  /** The newest builds first. */
  list(): ImageBuildRow[] {
    return this.statements.get('select * from "image_builds" order by "started_at" desc, rowid desc').all() as ImageBuildRow[];
  }
}
