/** The tar writer lives in src (build contexts use it); tests build images' trees with it too. */
export { tarArchive, type TarEntry } from '../../src/images/tar-archive.js';
