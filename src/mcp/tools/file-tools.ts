import { z } from 'zod';
import { encoding, writeFilesBody } from '../../schemas/file-schemas.js';
import { apiPath, filePath } from '../../client/api-client.js';
import { defineTool, text, type Tool } from '../tool.js';
import { sandboxFilePath, sandboxName } from './arguments.js';

/** GET /sandboxes/{name}/fs as the tool reads it. */
interface FsListingBody {
  path: string;
  entries: { name: string; type: string; size: number; mode: string; mtime: string }[];
  truncated: boolean;
}

const ENCODING = encoding.optional().meta({ description: 'utf8 (default) for text, base64 for binary content' });

/** Files inside running sandboxes. */
export const fileTools: Tool[] = [
  defineTool({
    name: 'sandbox_file_read',
    title: 'Read a file',
    description:
      'Read a file in a running sandbox. Returns its text as is when it is UTF-8 text; a binary file comes back as one line ' +
      'naming its size followed by its base64. Text over 16 KB shows its first and last 8 KB around a marker: read big ' +
      'files in parts with sandbox_exec (e.g. ["sed", "-n", "100,200p", "/workspace/log.txt"]).',
    inputSchema: z.strictObject({ name: sandboxName, path: sandboxFilePath }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handle: async ({ name, path }, { api, signal }) => {
      const file = await api.request<{ content: string; encoding: 'utf8' | 'base64'; size: number }>(
        { method: 'GET', path: filePath(name, path) },
        signal,
      );
      if (file.encoding === 'base64') return text(`binary file, ${file.size} bytes, base64:\n${file.content}`);
      return text(file.size === 0 ? '(empty file)' : file.content);
    },
  }),

  defineTool({
    name: 'sandbox_file_write',
    title: 'Write a file',
    description:
      'Write one file in a running sandbox, replacing it if it exists; parent directories are created. The file belongs to ' +
      'user "sandbox". Returns a confirmation such as "wrote 12 bytes to /workspace/main.py". Several files at once: ' +
      'sandbox_write_files.',
    inputSchema: z.strictObject({
      name: sandboxName,
      path: sandboxFilePath,
      content: z.string({ error: 'must be a string' }).meta({ description: 'The whole file content' }),
      encoding: ENCODING,
    }),
    annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
    handle: async ({ name, path, ...body }, { api, signal }) =>
      text(await api.request<string>({ method: 'PUT', path: filePath(name, path), body }, signal)),
  }),

  defineTool({
    name: 'sandbox_write_files',
    title: 'Write several files',
    description:
      'Write several files in a running sandbox in one call, e.g. a small project: {"files": {"main.py": "...", ' +
      '"/etc/app.conf": "..."}}. A path without a leading slash is absolute when its first name exists at the root or is a volume\'s mount point, else under /workspace; parent directories are created; every path is ' +
      'checked before the first file is written. Returns how many files were written.',
    inputSchema: z.strictObject({
      name: sandboxName,
      files: writeFilesBody.shape.files.meta({ description: 'Map of path to content; main.py is /workspace/main.py' }),
      encoding: ENCODING.meta({ description: 'Encoding of every content: utf8 (default) or base64' }),
    }),
    annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
    handle: async ({ name, ...body }, { api, signal }) => {
      const { written } = await api.request<{ written: number }>({ method: 'POST', path: apiPath('sandboxes', name, 'files'), body }, signal);
      return text(`wrote ${written} file${written === 1 ? '' : 's'}`);
    },
  }),

  defineTool({
    name: 'sandbox_file_list',
    title: 'List a directory',
    description:
      'List a directory in a running sandbox, e.g. /workspace: one line per entry, sorted by name, as "type size mode ' +
      'mtime name" (type file, dir, symlink or other; size in bytes; mode in octal). At most 10,000 entries; a last line ' +
      'says when there were more. Use sandbox_exec with find for a recursive search.',
    inputSchema: z.strictObject({ name: sandboxName, path: sandboxFilePath.meta({ description: 'The directory, e.g. /workspace (a relative path resolves as for files)' }) }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    capability: 'file_views',
    handle: async ({ name, path }, { api, signal }) => {
      const listing = await api.request<FsListingBody>({ method: 'GET', path: apiPath('sandboxes', name, 'fs'), query: { path } }, signal);
      const lines = listing.entries.map((e) => `${e.type.padEnd(7)} ${String(e.size).padStart(10)} ${e.mode} ${e.mtime} ${e.name}`);
      if (listing.truncated) lines.push('(more entries not shown: the first 10,000 by name)');
      return text(lines.length > 0 ? lines.join('\n') : `(${listing.path} is empty)`);
    },
  }),

  defineTool({
    name: 'sandbox_file_delete',
    title: 'Delete a file',
    description: 'Delete a file or a whole directory (recursively) in a running sandbox. Returns a confirmation such as "deleted /workspace/tmp".',
    inputSchema: z.strictObject({ name: sandboxName, path: sandboxFilePath }),
    annotations: { destructiveHint: true, openWorldHint: false },
    handle: async ({ name, path }, { api, signal }) => text(await api.request<string>({ method: 'DELETE', path: filePath(name, path) }, signal)),
  }),
];
