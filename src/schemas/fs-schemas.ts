import { z } from 'zod';

export const fsPathQuery = z.strictObject({
  path: z
    .string({ error: 'must be a string' })
    .min(1, 'a path is required, e.g. /workspace')
    .meta({ description: 'Path in the sandbox, e.g. /workspace; one without a leading slash resolves as in the file routes (absolute when its first name exists at the root or is a volume\'s mount point, else under /workspace)' }),
});

export const fsWatchQuery = fsPathQuery.extend({
  recursive: z.enum(['true', 'false'], { error: 'must be true or false' }).optional().meta({ description: 'Watch every directory below the path too (default true)' }),
});

export const fsEntry = z
  .object({
    name: z.string(),
    type: z.enum(['file', 'dir', 'symlink', 'other']),
    size: z.int(),
    mode: z.string().meta({ description: 'Permission bits in octal, e.g. 0644' }),
    mtime: z.string().meta({ description: 'Last modification, RFC 3339' }),
  })
  .meta({ id: 'FsEntry' });

export const fsStat = fsEntry.extend({ path: z.string() }).meta({ id: 'FsStat' });

export const fsListing = z
  .object({
    path: z.string(),
    entries: z.array(fsEntry).meta({ description: 'Sorted by name' }),
    truncated: z.boolean().meta({ description: 'The directory holds more than 10,000 entries: these are the first by name' }),
  })
  .meta({ id: 'FsListing' });
