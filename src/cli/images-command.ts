import { Command } from 'commander';
import { apiPath } from '../client/api-client.js';
import { CATALOG } from '../images/catalog.js';
import type { imageBuildView, ImageView } from '../schemas/image-schemas.js';
import type { z } from 'zod';
import { action, type ClientContext } from './client/client-context.js';
import { age, printJson, printList, printTable, reportFailure, sizeText, UsageError } from './client/output.js';
import { removeCommand } from './client/remove-command.js';

/**
 * `images build <name...>` (catalog images, built here with Docker, several at once; with
 * --file, an image from a Dockerfile through the server), `images list` (the server's catalog
 * and built images), `images rm` and `images builds`. Progress goes to stderr; stdout carries one result line per
 * image, so scripts (scripts/setup.sh) can read it. Failures set a non-zero exit code with the
 * error's own message, which says what to do.
 */
export function imagesCommand(ctx: ClientContext): Command {
  const images = new Command('images').alias('image').description('build, list and delete sandbox images (catalog images from Debian, images from a Dockerfile)');
  const api = () => ctx.connection().api;

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
    .action(async (names: string[], opts: { force: boolean; tag?: string; file?: string; name?: string }) => {
      if (opts.file) {
        const [context] = names;
        if (names.length > 1 || context === undefined) return reportFailure(new UsageError('--file takes one context directory'));
        const { buildFromDockerfile } = await import('./image-build.js');
        return buildFromDockerfile(context, { file: opts.file, ...(opts.name ? { name: opts.name } : {}), json: ctx.flags.json }, () => ctx.connection()).catch(reportFailure);
      }
      if (opts.tag && names.length > 1) return reportFailure(new UsageError('--tag takes a single image name'));
      const [{ default: Dockerode }, { buildImage }] = await Promise.all([import('dockerode'), import('../images/image-builder.js')]);
      const docker = new Dockerode();
      // Catalog images build at once: a layer image waits for the base image's build (the same
      // one, not a second), and the layers then build beside each other. Progress lines carry
      // the image's name when there are several; stdout has one line per image.
      const several = names.length > 1;
      const failures = await Promise.all(
        names.map(async (name) => {
          try {
            const result = await buildImage(name, {
              docker,
              force: opts.force,
              tag: opts.tag,
              onProgress: (line) => process.stderr.write(several ? `${name}: ${line}\n` : `${line}\n`),
            });
            if (result.skipped) {
              process.stdout.write(`${result.tag} is up to date (version ${result.version})\n`);
            } else {
              const { tag, sizeBytes, version, imageId } = result;
              process.stderr.write(`${tag}: ${sizeText(sizeBytes)}, version ${version}, id ${imageId}\n`);
              process.stdout.write(`built ${result.tag} in ${(result.durationMs / 1000).toFixed(1)} s\n`);
            }
            return undefined;
          } catch (err) {
            const message = err instanceof Error ? err.message : String(err);
            return several ? `${name}: ${message}` : message;
          }
        }),
      );
      for (const message of failures) if (message !== undefined) fail(message);
    });

  images
    .command('list')
    .alias('ls')
    .description("the server's images: the catalog (present or not) and the images built from a Dockerfile, with tag, id, size and age")
    .option('--local', "ask this machine's Docker instead of a server: the catalog images and whether each is present, stale or absent")
    .action(
      action(async (opts: { local?: boolean }) => {
        if (opts.local) return listLocalImages(ctx.flags.json);
        const list = await api().request<ImageView[]>({ method: 'GET', path: '/images' });
        printList(list, ctx.flags.json, ['NAME', 'KIND', 'TAG', 'STATUS', 'ID', 'SIZE', 'CREATED'], (i) => [i.name, i.kind, i.tag, i.present ? 'present' : 'absent', shortId(i.id), i.size_bytes === null ? '-' : sizeText(i.size_bytes), i.created_at ? `${age(i.created_at)} ago` : '-']);
      }),
    );

  removeCommand(images, ctx, { description: 'delete images built from a Dockerfile (refused while a sandbox uses one)', names: 'image names', route: (name) => apiPath('images', name) });

  images
    .command('builds')
    .description('the recorded builds from a Dockerfile, newest first: id, name, status, when, error')
    .action(
      action(async () => {
        const builds = await api().request<z.infer<typeof imageBuildView>[]>({ method: 'GET', path: '/images/builds' });
        printList(builds, ctx.flags.json, ['ID', 'NAME', 'STATUS', 'STARTED', 'ERROR'], (b) => [b.id, b.name, b.status, `${age(b.started_at)} ago`, b.error ?? '']);
      }),
    );
  return images;
}

/** `sha256:0123456789ab...` as docker shows it: 12 hex digits. */
const shortId = (id: string | null) => (id ? id.replace(/^sha256:/, '').slice(0, 12) : '-');

/** Prints the catalog with each image's state on this machine's Docker, as a table or as JSON. */
async function listLocalImages(json: boolean): Promise<void> {
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
  if (json) return printJson(rows);
  printTable(
    ['NAME', 'TAG', 'STATUS', 'SIZE', 'DESCRIPTION'],
    rows.map((row) => [row.name, row.tag, row.state === 'fresh' ? 'present' : row.state, row.sizeBytes ? sizeText(row.sizeBytes) : '-', row.description]),
  );
}

function fail(message: string): void {
  process.stderr.write(`sandboxd: ${message}\n`);
  process.exitCode = 1;
}
