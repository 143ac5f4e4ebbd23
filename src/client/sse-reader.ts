/**
 * Server-Sent Events as the API sends them (`event:` and one `data:` JSON line per event), read
 * as they arrive: `push` takes text in any pieces and hands on each complete event; comments
 * (heartbeats) are skipped.
 */
export class SseReader {
  private pending = '';

  constructor(private readonly onEvent: (event: string, data: unknown) => void) {}

  push(text: string): void {
    this.pending += text;
    let end: number;
    while ((end = this.pending.indexOf('\n\n')) >= 0) {
      const block = this.pending.slice(0, end);
      this.pending = this.pending.slice(end + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (event !== undefined && data !== undefined) this.onEvent(event, JSON.parse(data) as unknown);
    }
  }
}
