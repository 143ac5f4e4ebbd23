import type { Command } from 'commander';
import { EGRESS_MODES } from '../domain/egress.js';
import { profile } from '../schemas/common.js';
import type { CreateSandboxInput } from '../schemas/sandbox-schemas.js';
import { VOLUME_MOUNT_TEXT } from '../schemas/volume-schemas.js';
import { collect } from './cli-config.js';
import { oneOf } from './client/inputs.js';
import { integer, pairs, UsageError } from './client/output.js';

export interface CreateOptions {
  image?: string;
  profile?: string;
  vcpus?: string;
  memory?: string;
  disk?: string;
  description?: string;
  label?: string[];
  env?: string[];
  ttl?: string;
  volume?: string[];
  network?: string;
  allow?: string[];
  deny?: string[];
  secret?: string[];
  secretTls?: boolean;
}

/** The options of `sandbox create`, each a field of POST /sandboxes. */
export function createOptions(command: Command): Command {
  return command
    .option('--image <image>', "container image, or the name of an image built with `images build --file` (default: the server's)")
    .option('--profile <profile>', `security profile: ${profile.options.join(', ')}`)
    .option('--vcpus <n>', 'CPU cores')
    .option('--memory <mb>', 'memory limit in MiB')
    .option('--disk <mb>', 'what the sandbox may write, in MiB (disk_mb)')
    .option('--description <text>', 'a description')
    .option('--label <k=v>', 'a label; repeatable', collect)
    .option('--env <K=V>', 'an environment variable of every process; repeatable', collect)
    .option('--ttl <duration>', 'time to live, e.g. 1h')
    .option('--volume <name:/path[:ro]>', 'mount a named volume (`sandboxd volume create`) at an absolute path, read-only with :ro; repeatable', collect)
    .option('--network <egress>', `egress: ${EGRESS_MODES.join(', ')} (default open; none for restrictive; proxy when --allow is given)`)
    .option('--allow <entry>', 'egress allow list: a host glob (*.github.com), address or CIDR range, with an optional :port; repeatable or comma-separated', collect)
    .option('--deny <entry>', 'egress deny list, refused even where --allow matches; repeatable or comma-separated', collect)
    .option('--secret <NAME[=VALUE]@HOST>', 'a secret the egress proxy swaps in for a placeholder in requests to HOST only; the value is $NAME of this environment unless given; repeatable', collect)
    .option('--secret-tls', "swap the secrets into HTTPS requests too (the proxy terminates TLS for their hosts: intercept_tls)");
}

/** The body of POST /sandboxes from the options; a malformed one is a usage error naming the flag. */
export function createBody(name: string, opts: CreateOptions, env: NodeJS.ProcessEnv = process.env): CreateSandboxInput {
  const network = networkOf(opts);
  return {
    name,
    ...(opts.image ? { image: opts.image } : {}),
    ...(opts.profile ? { profile: oneOf(opts.profile, profile.options, '--profile') } : {}),
    ...(opts.vcpus ? { vcpus: integer(opts.vcpus, '--vcpus') } : {}),
    ...(opts.memory ? { memory_mb: integer(opts.memory, '--memory') } : {}),
    ...(opts.disk ? { disk_mb: integer(opts.disk, '--disk') } : {}),
    ...(opts.description !== undefined ? { description: opts.description } : {}),
    ...(opts.label ? { labels: pairs(opts.label, '--label') } : {}),
    ...(opts.env ? { env: pairs(opts.env, '--env') } : {}),
    ...(opts.ttl ? { ttl: opts.ttl } : {}),
    ...(opts.volume ? { volumes: opts.volume.map(volumeOf) } : {}),
    ...(network ? { network } : {}),
    ...(opts.secret ? { secrets: secretsOf(opts.secret, opts.secretTls === true, env) } : {}),
  };
}

/** `name:/path[:ro]` as the API's mount object. */
function volumeOf(text: string): { name: string; path: string; read_only?: boolean } {
  const [, volume, path, mode] = VOLUME_MOUNT_TEXT.exec(text) ?? [];
  if (volume === undefined || path === undefined) throw new UsageError(`--volume '${text}': expected NAME:/path or NAME:/path:ro`);
  return { name: volume, path, ...(mode === 'ro' ? { read_only: true } : {}) };
}

/** Comma-separated and repeated entries as one list. */
const entries = (values: string[] | undefined) => values?.flatMap((value) => value.split(',')).map((value) => value.trim()).filter(Boolean);

function networkOf(opts: CreateOptions): CreateSandboxInput['network'] {
  const allow = entries(opts.allow);
  const deny = entries(opts.deny);
  if (opts.network === undefined && !allow && !deny) return undefined;
  return {
    ...(opts.network !== undefined ? { egress: oneOf(opts.network, EGRESS_MODES, '--network') } : {}),
    ...(allow ? { allow } : {}),
    ...(deny ? { deny } : {}),
  };
}

/**
 * `NAME@HOST` (the value is $NAME of this environment, which keeps it off the command line and
 * out of the shell's history) or `NAME=VALUE@HOST`; HOST is the text after the last `@`.
 */
function secretsOf(values: string[], interceptTls: boolean, env: NodeJS.ProcessEnv): NonNullable<CreateSandboxInput['secrets']> {
  const secrets: NonNullable<CreateSandboxInput['secrets']> = {};
  for (const text of values) {
    const at = text.lastIndexOf('@');
    const [spec, host] = [text.slice(0, at), text.slice(at + 1)];
    const eq = spec.indexOf('=');
    const name = eq < 0 ? spec : spec.slice(0, eq);
    if (at <= 0 || !host || !name) throw new UsageError(`--secret '${text}': expected NAME@HOST or NAME=VALUE@HOST`);
    const value = eq < 0 ? env[name] : spec.slice(eq + 1);
    if (!value) throw new UsageError(`--secret '${text}': ${name} is not set in this environment: export it, or give NAME=VALUE@HOST`);
    secrets[name] = { value, host, intercept_tls: interceptTls };
  }
  return secrets;
}
