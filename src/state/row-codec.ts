/**
 * A record as the program holds a table's row: every column under its own name, `Fields`
 * replacing the row's type of some of them (JSON columns parsed, text columns narrowed to
 * their union). A plain new column reaches the record through the table type alone.
 */
export type Decoded<Row, Fields extends { [K in keyof Fields]: K extends keyof Row ? unknown : never }> = Omit<Row, keyof Fields> & Fields;

/**
 * The one conversion between a table's rows and its records. Rows and records spell every
 * field the same (the column's name); only the JSON columns differ: text in the row, the
 * parsed value in the record (a null column stays null both ways).
 */
export class RowCodec<Row extends object, Rec extends object> {
  constructor(private readonly jsonColumns: readonly (keyof Row & keyof Rec & string)[]) {}

  /** The record of a row read from the table. */
  fromRow(row: Row): Rec {
    const record: Record<string, unknown> = { ...(row as Record<string, unknown>) };
    for (const column of this.jsonColumns) {
      const text = record[column];
      if (typeof text === 'string') record[column] = JSON.parse(text);
    }
    return record as Rec;
  }

  /** The row of a whole record, for an insert. */
  toRow(record: Rec): Row {
    return this.toColumns(record) as Row;
  }

  /** The columns a partial record sets, for an update: fields that are undefined are left out. */
  toColumns(record: Partial<Rec>): Partial<Row> {
    const row: Record<string, unknown> = {};
    for (const [field, value] of Object.entries(record)) if (value !== undefined) row[field] = value;
    for (const column of this.jsonColumns) {
      const value = row[column];
      if (value !== undefined && value !== null) row[column] = JSON.stringify(value);
    }
    return row as Partial<Row>;
  }
}
