import type { IncomingMessage } from 'node:http';
import { StringDecoder } from 'node:string_decoder';
import type { FsEntry, FsListing, FsWatchEvent } from '../types.js';
import { isServiceError, ServiceError } from '../../errors.js';
import type { AgentClient } from './agent-client.js';

/**
 * File system views through a sandbox's agent (agent/README.md, "File system views"): listings
 * and stat answer JSON from `/v1/files?op=list|stat`, a watch streams one JSON line per event
 * from `/v1/fs/watch` until the request is aborted, which ends the watch in the agent.
 */

export async function listDirectory(agent: AgentClient, path: string): Promise<FsListing> {
  try {
    return (await view(agent, 'list', path)) as FsListing;
  } catch (err) {
    // An agent without views reads the directory as a file, and refuses that.
    if (isServiceError(err) && err.code === 'BAD_REQUEST' && err.message.endsWith('is a directory')) throw olderAgent();
    throw err;
  }
}

export async function statPath(agent: AgentClient, path: string): Promise<FsEntry> {
  const entry = (await view(agent, 'stat', path)) as FsEntry & { path?: string };
  delete entry.path;
  return entry;
}

/** A view's JSON; an agent without views answers a file's bytes instead. */
async function view(agent: AgentClient, op: 'list' | 'stat', path: string): Promise<unknown> {
  const response = await agent.get(`/v1/files?op=${op}&path=${encodeURIComponent(path)}`, path);
  const body = await text(response);
  if (!String(response.headers['content-type']).includes('json')) throw olderAgent();
  return JSON.parse(body) as unknown;
}

function olderAgent(): ServiceError {
  return new ServiceError('UNSUPPORTED', 'file system views in a sandbox whose agent predates them (made by an older sandboxd): recreate the sandbox');
}

/** Resolves once the agent watches (its refusals first); the events end when `signal` aborts. */
export async function watchPath(agent: AgentClient, path: string, options: { recursive: boolean; signal: AbortSignal }): Promise<AsyncIterable<FsWatchEvent>> {
  const route = `/v1/fs/watch?path=${encodeURIComponent(path)}&recursive=${options.recursive}`;
  const response = await agent.get(route, path, options.signal);
  return lines(response, options.signal);
}

async function text(response: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of response as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

/** The response's JSON lines as events; an abort ends them quietly. */
async function* lines(response: IncomingMessage, signal: AbortSignal): AsyncGenerator<FsWatchEvent> {
  const decoder = new StringDecoder('utf8');
  let pending = '';
  try {
    for await (const chunk of response as AsyncIterable<Buffer>) {
      pending += decoder.write(chunk);
      let end: number;
      while ((end = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, end);
        pending = pending.slice(end + 1);
        if (line.trim() !== '') yield JSON.parse(line) as FsWatchEvent;
      }
    }
  } catch (err) {
    if (!signal.aborted) throw new ServiceError('INTERNAL', `the sandbox's agent closed the watch (${(err as Error).message}): the sandbox may have stopped`);
  } finally {
    response.destroy();
  }
}
