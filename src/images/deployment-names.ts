/**
 * Names of a deployment's own images on a shared engine. Each server's engine objects carry its
 * deployment id (see Store): images it builds from a Dockerfile and snapshots it takes are
 * tagged under it, so that two servers on one engine never replace, list or remove each
 * other's. Catalog images (`sandboxd/base`, ...; images/catalog.ts) are the installation's,
 * shared by every deployment, and keep their names.
 */

import { ServiceError } from '../errors.js';

/** The label holding the deployment id on every engine object a server makes (named before deployment ids). */
export const DEPLOYMENT_LABEL = 'sandboxd.instance';

/** The repository of images built from a Dockerfile: `sandboxd-user/<deployment id>/<name>:latest`. */
export const USER_IMAGE_REPOSITORY = 'sandboxd-user';
/** The label that marks a built image (its value is the name). */
export const USER_IMAGE_LABEL = 'sandboxd.user_image';

/** The tag of the deployment's built image `name`. */
export const userImageTag = (deploymentId: string, name: string): string => `${USER_IMAGE_REPOSITORY}/${deploymentId}/${name}:latest`;

/** The tag a built image had before deployment ids (shared by every server on the engine). */
export const legacyUserImageTag = (name: string): string => `${USER_IMAGE_REPOSITORY}/${name}:latest`;

/** The tag of the deployment's snapshot `name`: `<prefix>/<deployment id>:<name>`. */
export const snapshotTag = (prefix: string, deploymentId: string, name: string): string => `${prefix}/${deploymentId}:${name}`;

/**
 * `image: NAME` of a sandbox: the tag of the deployment's built image NAME when there is one (a
 * bare name, as GET /images lists it, or `NAME:latest`), else the reference as given, which the
 * engine resolves. A built image has no other tag: `NAME:v2` where NAME is a built image is a
 * 400 that says to name it bare (rather than a pull from a registry that fails later).
 */
export async function resolveBuiltImage(image: string, deploymentId: string, inspect: ((reference: string) => Promise<unknown>) | undefined): Promise<string> {
  const [, name, tag] = /^([a-z0-9][a-z0-9._-]*)(?::([\w][\w.-]{0,127}))?$/.exec(image) ?? [];
  if (!inspect || name === undefined) return image;
  const built = userImageTag(deploymentId, name);
  if (!(await inspect(built))) return image;
  if (tag === undefined || tag === 'latest') return built;
  throw new ServiceError('BAD_REQUEST', `image '${image}': '${name}' is an image built here, which has no tag '${tag}': name it '${name}' (sandboxd images list shows them)`);
}
