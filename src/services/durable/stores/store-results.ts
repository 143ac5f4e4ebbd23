import { ServiceError } from '../../../errors.js';
import type { StatementResultBody } from '../../../schemas/store-schemas.js';
import { MAX_RESULT_BYTES, type EngineWarning, type RowSet, type StatementResult } from './store-engine.js';

/** What one response may carry: rows past it are cut (`truncated: true`), a command result past it is 413. */
export const MAX_RESPONSE_BYTES = MAX_RESULT_BYTES;

/** Room kept for the envelope and the fields beside the rows. */
const ENVELOPE_BYTES = 4096;

/**
 * A row budget shared by the row sets of one response: rows are kept while their JSON fits,
 * the first that does not and every one after it are cut.
 */
export class RowBudget {
  private left: number;

  constructor(bytes = MAX_RESPONSE_BYTES - ENVELOPE_BYTES) {
    this.left = bytes;
  }

  /** The rows that fit (in order), and whether some were cut. */
  take(set: Pick<RowSet, 'columns' | 'column_types' | 'rows'>): { rows: unknown[][]; cut: boolean } {
    this.left -= jsonBytes(set.columns) + jsonBytes(set.column_types);
    let kept = 0;
    for (const row of set.rows) {
      // Each row is one more element of the rows array: its JSON and a comma.
      const bytes = jsonBytes(row) + 1;
      if (bytes > this.left) break;
      this.left -= bytes;
      kept++;
    }
    return kept === set.rows.length ? { rows: set.rows, cut: false } : { rows: set.rows.slice(0, kept), cut: true };
  }
}

/** A query's rows as the response carries them: cut at max_rows by the engine, at the size cap here. */
export function queryRows(set: RowSet): { rows: unknown[][]; truncated: boolean; warnings?: EngineWarning[] } {
  const { rows, cut } = new RowBudget().take(set);
  return { rows, truncated: set.truncated || cut, ...(set.warnings ? { warnings: set.warnings } : {}) };
}

/** The engine's statement results as the response carries them, RETURNING rows cut to one shared budget. */
export function statementBodies(results: StatementResult[]): StatementResultBody[] {
  const budget = new RowBudget();
  return results.map((result) => {
    const body: StatementResultBody = {
      rows_affected: result.rows_affected,
      last_insert_id: result.last_insert_id,
      last_insert_rowid: result.last_insert_id,
    };
    if (result.result) {
      const { rows, cut } = budget.take(result.result);
      Object.assign(body, { columns: result.result.columns, rows, truncated: result.result.truncated || cut });
    }
    const warnings = result.warnings ?? result.result?.warnings;
    if (warnings) body.warnings = warnings;
    return body;
  });
}

/** A command's result, or PAYLOAD_TOO_LARGE when its JSON would pass the size cap. */
export function commandResultOf(result: unknown): { result: unknown } {
  const bytes = jsonBytes(result ?? null);
  if (bytes > MAX_RESPONSE_BYTES - ENVELOPE_BYTES) {
    throw new ServiceError(
      'PAYLOAD_TOO_LARGE',
      `command: its result is ${bytes} bytes of JSON, more than a response may carry (8 MiB); ask for less at once (e.g. SCAN with COUNT, fewer keys per MGET)`,
    );
  }
  return { result: result ?? null };
}

function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), 'utf8');
}
