import type { Command } from 'commander';
import { CATALOG } from '../images/catalog.js';

/**
 * Adds `images build <name...>` and `images list` to the CLI. Progress goes to stderr; stdout
 * carries one result line per image, so scripts (scripts/setup.sh) can read it. Failures set
 * a non-zero exit code with the error's own message, which says what to do.
 */
export function registerImagesCommand(program: Command): void {
  const images = program.command('images').description('build and list sandbox images (Debian, built locally)');

  images
    .command('build')
    .description(
      `build catalog images from Debian packages (${CATALOG.map((e) => e.name).join(', ')}), or, with --file, ` +
        'an image from a Dockerfile and a directory through the server (sandboxd-user/<deployment id>/NAME:latest)',
    )
    .argument('<name...>', 'catalog image names, e.g. base; with --file: the context directory')
    .option('--force', 'rebuild even when an up-to-date image is present', false)
    .option('--tag <tag>', 'import under this tag instead of the catalog tag (one image only)')
    .option('-f, --file <Dockerfile>', 'build the directory with this Dockerfile on the server (POST /images)')
    .option('--name <name>', "with --file: the image's name (default: the directory's)")
    .option('--server <url>', 'with --file: the server (default SANDBOXD_URL or SERVICE_URL, the local server, http://127.0.0.1:18888)')
    .option('--api-key <key>', "with --file: the server's API key (default SERVICE_API_KEY)")
    .option('--json', 'with --file: print the result as JSON', false)
    .action(async (names: string[], opts: { force: boolean; tag?: string; file?: string; name?: string; server?: string; apiKey?: string; json: boolean }) => {
      if (opts.file) {
        const [context] = names;
        if (names.length > 1 || context === undefined) return fail('--file takes one context directory');
        const [{ buildFromDockerfile }, { reportFailure }] = await Promise.all([import('./image-build.js'), import('./client/output.js')]);
        return buildFromDockerfile(context, { ...opts, file: opts.file }).catch(reportFailure);
      }
      if (opts.tag && names.length > 1) return fail('--tag takes a single image name');
      const [{ default: Dockerode }, { buildImage }] = await Promise.all([import('dockerode'), import('../images/image-builder.js')]);
      const docker = new Dockerode();
      for (const name of names) {
        try {
          const result = await buildImage(name, {
            docker,
            force: opts.force,
            tag: opts.tag,
            onProgress: (line) => process.stderr.write(`${line}\n`),
          });
          if (result.skipped) {
            process.stdout.write(`${result.tag} is up to date (version ${result.version})\n`);
          } else {
            const { tag, sizeBytes, version, imageId } = result;
            process.stderr.write(`${tag}: ${megabytes(sizeBytes)}, version ${version}, id ${imageId}\n`);
            process.stdout.write(`built ${result.tag} in ${(result.durationMs / 1000).toFixed(1)} s\n`);
          }
        } catch (err) {
          return fail(err instanceof Error ? err.message : String(err));
        }
      }
    });

  images
    .command('list')
    .description('show the catalog and which images are present')
    .option('--json', 'print JSON instead of a table', false)
    .action(async (opts: { json: boolean }) => {
      try {
        await listImages(opts.json);
      } catch (err) {
        fail(err instanceof Error ? err.message : String(err));
      }
    });
}

/** Prints the catalog with each image's state, as a table or as JSON. */
async function listImages(json: boolean): Promise<void> {
  // Loaded here, not at the top: the other commands start without Docker's client.
  const [{ default: Dockerode }, { imageState }] = await Promise.all([import('dockerode'), import('../images/image-builder.js')]);
  const docker = new Dockerode();
  const rows = await Promise.all(
    CATALOG.map(async (entry) => ({
      name: entry.name,
      tag: entry.tag,
      description: entry.description,
      ...(await imageState(entry, { docker })),
    })),
  );
  if (json) {
    process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
    return;
  }
  const header = ['NAME', 'TAG', 'STATUS', 'SIZE', 'DESCRIPTION'];
  const table = [header];
  for (const row of rows) {
    const size = row.sizeBytes ? megabytes(row.sizeBytes) : '-';
    table.push([row.name, row.tag, row.state === 'fresh' ? 'present' : row.state, size, row.description]);
  }
  const widths = header.map((_, col) => Math.max(...table.map((cells) => (cells[col] ?? '').length)));
  for (const cells of table) {
    process.stdout.write(`${cells.map((cell, col) => cell.padEnd(widths[col] ?? 0)).join('  ').trimEnd()}\n`);
  }
}

function megabytes(bytes: number): string {
  return `${(bytes / 1e6).toFixed(0)} MB`;
}

function fail(message: string): void {
  process.stderr.write(`sandboxd: ${message}\n`);
  process.exitCode = 1;
}
