/**
 * The paths a proxy hook's `path_prefix` is matched against: the request's path as upstream
 * servers read it, not as the sandbox spelled it, so that `/%62locked`, `//blocked`,
 * `/;/blocked` or `/a/..;/blocked` are the `/blocked` they reach. Two readings, since servers
 * differ: the strict one (RFC 3986 normalization: percent-encoded unreserved characters decoded,
 * other escapes in upper case) and the lenient one (every escape decoded, `\` a separator), each
 * then without `;parameters` in a segment, with duplicate slashes collapsed and dot segments
 * removed. A prefix matches when it begins either reading.
 */

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/** `%XX` of an unreserved character decoded, any other escape in upper case (RFC 3986 6.2.2). */
function decodeUnreserved(path: string): string {
  return path.replace(/%([0-9A-Fa-f]{2})/g, (escape, hex: string) => {
    const char = String.fromCharCode(parseInt(hex, 16));
    return UNRESERVED.test(char) ? char : escape.toUpperCase();
  });
}

/** Every `%XX` decoded (as UTF-8 where the bytes are, else each byte as its code point); `\` as `/`. */
function decodeAll(path: string): string {
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    decoded = path.replace(/%([0-9A-Fa-f]{2})/g, (_escape, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  }
  return decoded.replaceAll('\\', '/');
}

/**
 * `;parameters` out of each segment (servers such as Tomcat and Jetty drop them), duplicate
 * slashes collapsed, dot segments removed (RFC 3986 5.2.4); a trailing slash kept.
 */
function canonical(path: string): string {
  const segments = path.split('/').map((segment) => segment.replace(/;.*$/s, ''));
  const out: string[] = [];
  const last = segments.length - 1;
  segments.forEach((segment, index) => {
    if (segment === '..') out.pop();
    else if (segment !== '.' && segment !== '') out.push(segment);
    // A directory to end on: `/a/`, `/a/.`, `/a/b/..` all name the directory `/a/`.
    if (index === last && (segment === '' || segment === '.' || segment === '..') && out.length > 0) out.push('');
  });
  return `/${out.join('/')}`;
}

/** The readings of a request's path a hook's prefix is matched against (see the module comment). */
export function pathReadings(path: string): string[] {
  const strict = canonical(decodeUnreserved(path));
  const lenient = canonical(decodeAll(path));
  return strict === lenient ? [strict] : [strict, lenient];
}

/**
 * A `path_prefix` as a predicate on request paths: whether either reading of the path begins
 * with the prefix (itself in the strict reading), ignoring case when `ignoreCase`.
 */
export function pathPrefixMatcher(prefix: string, ignoreCase: boolean): (path: string) => boolean {
  const fold = (text: string) => (ignoreCase ? text.toLowerCase() : text);
  const wanted = fold(canonicalPrefix(prefix));
  return (path) => pathReadings(path).some((reading) => fold(reading).startsWith(wanted));
}

/** A prefix in the strict reading; one that ends in `/` keeps it (`/api/` is not `/api`). */
function canonicalPrefix(prefix: string): string {
  const reading = canonical(decodeUnreserved(prefix));
  return prefix.endsWith('/') && !reading.endsWith('/') ? `${reading}/` : reading;
}
