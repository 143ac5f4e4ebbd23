/** One Server-Sent Event, its data as it was sent. */
export interface SseEvent {
  event: string;
  id?: string;
  data: string;
}

/**
 * The events of an SSE response as they arrive, for a caller that reads the stream itself
 * (the CLI's exec, logs, events and image build); comments (heartbeats) are skipped.
 */
export async function* sseEvents(response: AsyncIterable<Buffer | string>): AsyncGenerator<SseEvent> {
  let buffer = '';
  let event: SseEvent = { event: 'message', data: '' };
  let hasData = false;
  for await (const chunk of response) {
    buffer += chunk.toString();
    let newline: number;
    while ((newline = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, newline).replace(/\r$/, '');
      buffer = buffer.slice(newline + 1);
      if (line === '') {
        if (hasData) yield event;
        event = { event: 'message', data: '' };
        hasData = false;
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') event.event = value;
      else if (field === 'id') event.id = value;
      else if (field === 'data') {
        event.data = hasData ? `${event.data}\n${value}` : value;
        hasData = true;
      }
    }
  }
}
