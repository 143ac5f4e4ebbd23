import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package's root folder, found from this file whether it runs from src/ or dist/src/. */
export const PACKAGE_ROOT: string = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'sandboxd') {
      return dir;
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error('sandboxd: package.json not found above ' + fileURLToPath(import.meta.url));
    dir = parent;
  }
})();

/** The running version, from package.json. */
export const VERSION: string = (JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string })
  .version;
