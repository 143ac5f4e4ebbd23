/**
 * The image reference grammar of the engine (the distribution reference grammar):
 *
 *   reference  := name [ ":" tag ] [ "@" digest ]
 *   name       := [ domain [ ":" port ] "/" ] path-component [ "/" path-component ]*
 *   path-component := [a-z0-9]+ ( ( [._] | "__" | "-"+ ) [a-z0-9]+ )*
 *   tag        := [\w][\w.-]{0,127}
 *   digest     := algorithm ":" hex{32,}
 *
 * A name is at most 255 characters. Checking a reference against it before the engine sees it
 * keeps paths such as `../127.0.0.1:1/x` (which the engine answers with a redirect), URLs and
 * control characters out of the engine's API paths.
 */

const ALPHANUMERIC = '[a-z0-9]+';
const SEPARATOR = '(?:[._]|__|[-]+)';
const PATH_COMPONENT = `${ALPHANUMERIC}(?:${SEPARATOR}${ALPHANUMERIC})*`;
const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[a-fA-F0-9:]+\\])(?::[0-9]+)?`;
const TAG = '[\\w][\\w.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const REFERENCE = new RegExp(`^((?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*)(?::(${TAG}))?(?:@(${DIGEST}))?$`);

/** Longest image name (without tag and digest) the engine accepts. */
export const MAX_IMAGE_NAME_LENGTH = 255;
/** Longest reference accepted: a full name, a tag and a sha512 digest. */
export const MAX_IMAGE_REFERENCE_LENGTH = 512;

/** Why `reference` is not an image reference the engine accepts, or undefined when it is one. */
export function imageReferenceProblem(reference: string): string | undefined {
  if (reference.length === 0) return 'must not be empty';
  if (reference.length > MAX_IMAGE_REFERENCE_LENGTH) return `must be at most ${MAX_IMAGE_REFERENCE_LENGTH} characters`;
  const match = REFERENCE.exec(reference);
  if (!match) {
    return 'must be an image reference such as sandboxd/base:bookworm or registry.example.com:5000/team/app:1.2 ([registry[:port]/]path[:tag][@digest]; lowercase path components)';
  }
  if ((match[1]?.length ?? 0) > MAX_IMAGE_NAME_LENGTH) return `its name must be at most ${MAX_IMAGE_NAME_LENGTH} characters`;
  return undefined;
}

/** Whether `reference` is an image reference the engine accepts. */
export const isImageReference = (reference: string): boolean => imageReferenceProblem(reference) === undefined;
