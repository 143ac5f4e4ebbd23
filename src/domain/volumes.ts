/**
 * Named volumes (docs/decisions.md, "Volumes"): storage that outlives the sandboxes that mount
 * it, at a path of the sandbox's choosing that is not a system directory.
 */

/** A named volume at an absolute path of a sandbox (the agentkernel SDK's `volumes` field). */
export interface VolumeMount {
  name: string;
  path: string;
  read_only?: boolean;
}

/** Directories a volume may not hide, nor sit below: the system's own files, devices and kernel state. */
export const SYSTEM_DIRECTORIES = ['/bin', '/boot', '/dev', '/etc', '/lib', '/lib32', '/lib64', '/libx32', '/proc', '/run', '/sbin', '/sys', '/usr', '/var'] as const;

/** Why a volume may not be mounted at `path`, or undefined when it may. */
export function volumePathProblem(path: string): string | undefined {
  if (!path.startsWith('/')) return `'${path}' must be an absolute path`;
  if (path.includes('\0')) return 'must not contain NUL bytes';
  const segments = path.split('/').filter((segment) => segment !== '');
  if (segments.some((segment) => segment === '.' || segment === '..')) return `'${path}' must not contain '.' or '..' segments`;
  if (segments.length === 0) return "'/' is the sandbox's root: mount a volume below it, e.g. /workspace/data or /data";
  const normal = `/${segments.join('/')}`;
  const system = SYSTEM_DIRECTORIES.find((dir) => normal === dir || normal.startsWith(`${dir}/`));
  if (system) return `'${normal}' is ${normal === system ? '' : 'under '}${system}, a system directory: mount a volume elsewhere, e.g. /workspace/data or /data`;
  if (Buffer.byteLength(normal) >= 4096) return 'must be shorter than 4096 bytes';
  return undefined;
}

/** The path as mounted: no repeated or trailing slashes. */
export function normalVolumePath(path: string): string {
  return `/${path.split('/').filter((segment) => segment !== '').join('/')}`;
}
